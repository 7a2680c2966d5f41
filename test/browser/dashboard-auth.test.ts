/**
 * The dashboard in Chromium against a gateway with keys: `/capsules` answers 401, the page asks for
 * a key; a wrong key (401) and a key without the ops scope (403) are each said so and asked again,
 * with no polling while it waits; the right key shows the fleet and a live tail on EventSource with
 * tickets; a reload does not ask again (the key is kept for the tab); the key never goes in a URL.
 */
import type { Page, Request } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { demoGatewayForFile } from '../support/demo-gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';
import { waitForTailToMove } from './dashboard-tail.js';

/** Page-side globals (these callbacks run in Chromium; the project's lib has no DOM). */
declare const document: {
  querySelector(s: string): { getAttribute(n: string): string | null; textContent: string | null } | null;
};

const KEY = {
  operator: `key-operator-${'a'.repeat(24)}`,
  observeOnly: `key-observe-${'b'.repeat(24)}`,
  wrong: `key-wrong-${'c'.repeat(24)}`,
};

interface Seen {
  capsules: { status: number | null; auth: string | undefined }[];
  ticketPosts: number;
  /** The fleet's follow connections (EventSource), with the ticket each carried. */
  streams: string[];
  urls: string[];
}

const watch = (p: Page): Seen => {
  const seen: Seen = { capsules: [], ticketPosts: 0, streams: [], urls: [] };
  const entries = new Map<Request, Seen['capsules'][number]>();
  p.on('request', (r) => {
    const url = new URL(r.url());
    seen.urls.push(r.url());
    if (url.pathname === '/capsules') {
      const entry = { status: null, auth: r.headers().authorization };
      entries.set(r, entry);
      seen.capsules.push(entry);
    }
    if (r.method() === 'POST' && url.pathname === '/auth/tickets') seen.ticketPosts++;
    if (url.pathname === '/v1/follow' && r.resourceType() === 'eventsource')
      seen.streams.push(url.searchParams.get('ticket') ?? '');
  });
  p.on('response', (res) => {
    const entry = entries.get(res.request());
    if (entry) entry.status = res.status();
  });
  return seen;
};

const submitKey = async (p: Page, key: string): Promise<void> => {
  await p.waitForSelector('#key-form:not([hidden])');
  await p.fill('#key', key);
  await p.click('#key-form button[type=submit]');
};

describe.skipIf(!hasBrowser)('dashboard in Chromium with auth on', () => {
  const gw = demoGatewayForFile({
    auth: {
      apiKeys: [
        { sha256: sha256Hex(KEY.operator), owner: 'operator', scopes: ['ops', 'observe'] },
        { sha256: sha256Hex(KEY.observeOnly), owner: 'operator', scopes: ['observe'] },
      ],
    },
  });
  const browser = chromiumForFile();

  it(
    'asks for a key once, says when one is refused, then shows the fleet and a live tail on tickets',
    { timeout: 60_000 },
    async () => {
      const page = await browser().newPage({ viewport: { width: 1280, height: 720 } });
      const seen = watch(page);
      await page.goto(`${gw().baseUrl}/dashboard`);

      // No key yet: asked, without an error.
      await page.waitForSelector('#key-form:not([hidden])');
      expect(await page.textContent('#key-error')).toBe('');

      // A wrong key, then one without the ops scope: each refusal is said, and the page asks again.
      await submitKey(page, KEY.wrong);
      await page.waitForFunction(() =>
        /refused \(401\)/.test(document.querySelector('#key-error')?.textContent ?? ''),
      );
      // While it waits for a key it polls nothing (the old page asked /capsules every second).
      await new Promise((r) => setTimeout(r, 2_500));
      expect(seen.capsules.map((c) => c.status)).toEqual([401, 401]);
      await submitKey(page, KEY.observeOnly);
      await page.waitForFunction(() =>
        /lacks the "ops" scope/.test(document.querySelector('#key-error')?.textContent ?? ''),
      );
      expect(seen.capsules.map((c) => c.status)).toEqual([401, 401, 403]);

      // The right key: the fleet, and the tail moving on EventSource with tickets.
      await submitKey(page, KEY.operator);
      await page.waitForSelector('#fleet tbody tr[data-capsule="demo-beta"]');
      await waitForTailToMove(page);
      expect(await page.isHidden('#key-form')).toBe(true);
      expect(seen.ticketPosts).toBeGreaterThanOrEqual(1);
      expect(seen.streams.length).toBeGreaterThanOrEqual(1);
      expect(seen.streams.every((t) => t.startsWith('t1.'))).toBe(true);
      const withKey = seen.capsules.slice(3);
      expect(withKey.length).toBeGreaterThanOrEqual(1);
      expect(withKey.every((c) => c.status === 200 && c.auth === `Bearer ${KEY.operator}`)).toBe(true);

      // A reload keeps the key for the tab: no second prompt.
      const before = seen.capsules.length;
      await page.reload();
      await page.waitForSelector('#fleet tbody tr[data-capsule="demo-beta"]');
      expect(seen.capsules.slice(before).every((c) => c.status !== 401 && c.status !== 403)).toBe(true);
      expect(await page.isHidden('#key-form')).toBe(true);

      // The keys never appear in a URL (tickets do, keys do not).
      expect(seen.urls.filter((u) => Object.values(KEY).some((k) => u.includes(k)))).toEqual([]);
      await page.close();
    },
  );
});
