/**
 * What HTTP/2 buys a page, in Debian's Chromium: over HTTP/1.1 a page gets six connections to an
 * origin and every EventSource holds one, so the seventh waits until one of the six closes (and so
 * does every other request of the page); over HTTPS with HTTP/2 the same page holds 40 live
 * EventSources on one connection, each gets every frame, and the page's other requests still go.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';

/** Page-side globals (these callbacks run in Chromium; the project's lib has no DOM). */
declare const performance: { getEntriesByType(type: string): unknown[] };
declare const window: {
  sources: { es: { close(): void }; opened: number; got: string[] }[];
  EventSource: new (url: string) => {
    onopen: (() => void) | null;
    addEventListener(type: string, fn: (e: { data: string }) => void): void;
    close(): void;
  };
};

const STREAMS = 40;

let context: BrowserContext | null = null;
let page: Page | null = null;
let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;

/** Open `n` EventSources on the capsule's native stream; each counts its opens and status frames. */
const openSources = (p: Page, n: number) =>
  p.evaluate((count) => {
    window.sources = [];
    for (let i = 0; i < count; i++) {
      const es = new window.EventSource('/murmur/cap/events');
      const entry = { es, opened: 0, got: [] as string[] };
      es.onopen = () => entry.opened++;
      es.addEventListener('text', (e) => entry.got.push(e.data));
      window.sources.push(entry);
    }
  }, n);

const openCount = (p: Page) => p.evaluate(() => window.sources.filter((s) => s.opened > 0).length);
/** How many open sources have a text frame containing `marker`. */
const gotCount = (p: Page, marker: string) =>
  p.evaluate((m) => window.sources.filter((s) => s.got.some((d) => d.includes(m))).length, marker);

describe.skipIf(!hasBrowser)('many EventSources in one page', () => {
  let certDir = '';
  const browser = chromiumForFile();
  beforeAll(() => {
    certDir = mkdtempSync(join(tmpdir(), 'mg-tls-page-'));
    execFileSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost'],
        ...['-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
        ...['-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')],
      ],
      { stdio: 'ignore' },
    );
  });
  afterEach(async () => {
    await context?.close();
    await gw?.close();
    await sim?.stop();
    context = page = null;
    gw = null;
    sim = null;
  });

  const setup = async (extra: Record<string, unknown>): Promise<Page> => {
    sim = await startSimulator({ heartbeatMs: 500 });
    gw = await startTestGateway({ capsules: { cap: sim.url }, extra });
    // The test's own certificate: trusted for this context only.
    context = await browser().newContext({ ignoreHTTPSErrors: true });
    page = await context.newPage();
    // A page of the origin that opens nothing itself (the dashboard would hold connections of its own).
    await page.goto(`${gw.baseUrl}/healthz`);
    return page;
  };

  it('HTTP/1.1: six open, the seventh waits until one of the six closes', async () => {
    const p = await setup({});
    await openSources(p, STREAMS);
    await p.waitForFunction(() => window.sources.filter((s) => s.opened > 0).length >= 6);
    // A whole frame's round trip to the six: the other 34 had all that time and never opened.
    await sim!.submit('#sim {"reply":"h1-marker"}').done;
    await p.waitForFunction(
      () => window.sources.filter((s) => s.got.some((d) => d.includes('h1-marker'))).length === 6,
    );
    expect(await openCount(p)).toBe(6);
    // One of the six closes: exactly one waiting source takes its connection.
    await p.evaluate(() => window.sources.find((s) => s.opened > 0)!.es.close());
    await p.waitForFunction(() => window.sources.filter((s) => s.opened > 0).length === 7);
  });

  it('HTTPS with HTTP/2: 40 live EventSources on one connection, each gets the frame, other requests go', async () => {
    const p = await setup({
      server: { tls: { cert: join(certDir, 'cert.pem'), key: join(certDir, 'key.pem') } },
    });
    expect(gw!.baseUrl).toMatch(/^https:/);
    await openSources(p, STREAMS);
    await p.waitForFunction((n) => window.sources.filter((s) => s.opened > 0).length === n, STREAMS);
    await sim!.submit('#sim {"reply":"h2-marker"}').done;
    await p.waitForFunction(
      (n) => window.sources.filter((s) => s.got.some((d) => d.includes('h2-marker'))).length === n,
      STREAMS,
    );
    expect(await gotCount(p, 'h2-marker')).toBe(STREAMS);
    // The page's other requests are not queued behind the streams.
    expect(await p.evaluate(async () => (await fetch('/healthz')).status)).toBe(200);
    // The page spoke HTTP/2 to the gateway.
    expect(
      await p.evaluate(
        () =>
          (performance.getEntriesByType('navigation')[0] as unknown as { nextHopProtocol: string })
            .nextHopProtocol,
      ),
    ).toBe('h2');
  });
});
