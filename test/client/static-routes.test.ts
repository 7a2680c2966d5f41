/**
 * The gateway serves the client as one self-contained ES module with an ETag (304 on
 * If-None-Match) and a long cache lifetime, and the dashboard's files.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ capsules: {} });
});
afterAll(() => gw.close());

describe('static routes', () => {
  it('GET /client/murmur-gateway.js: one importable module, cached, ETag → 304', async () => {
    const res = await fetch(`${gw.baseUrl}/client/murmur-gateway.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/javascript/);
    expect(res.headers.get('cache-control')).toMatch(/max-age=\d{5,}/);
    const etag = res.headers.get('etag');
    expect(etag).toMatch(/^".+"$/);
    const source = await res.text();
    // Self-contained: no import of anything else.
    expect(source).not.toMatch(/^\s*import\s/m);
    const file = join(mkdtempSync(join(tmpdir(), 'mg-client-')), 'murmur-gateway.mjs');
    writeFileSync(file, source);
    const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    expect(typeof mod.followCapsule).toBe('function');
    expect(typeof mod.followBeeos).toBe('function');
    const again = await fetch(`${gw.baseUrl}/client/murmur-gateway.js`, {
      headers: { 'if-none-match': etag! },
    });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
  });

  it('/dashboard redirects to /dashboard/, which serves the page and its assets', async () => {
    const redirect = await fetch(`${gw.baseUrl}/dashboard`, { redirect: 'manual' });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get('location')).toBe('/dashboard/');
    const page = await fetch(`${gw.baseUrl}/dashboard/`);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain('dashboard.js');
    const js = await fetch(`${gw.baseUrl}/dashboard/dashboard.js`);
    expect(await js.text()).toContain("from '../client/murmur-gateway.js'");
    expect((await fetch(`${gw.baseUrl}/dashboard/..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${gw.baseUrl}/dashboard/nope.js`)).status).toBe(404);
  });

  it('GET / redirects to the dashboard (open, like the dashboard itself)', async () => {
    const root = await fetch(`${gw.baseUrl}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/dashboard/');
    const followed = await fetch(`${gw.baseUrl}/`);
    expect(followed.url).toBe(`${gw.baseUrl}/dashboard/`);
    expect(await followed.text()).toContain('dashboard.js');
    // Only the root: any other unknown path is still the ops grammar's 404.
    const other = await fetch(`${gw.baseUrl}/nowhere`);
    expect(other.status).toBe(404);
    expect(await other.json()).toEqual({
      error: { code: 'not_found', message: 'no route for GET /nowhere' },
    });
  });
});
