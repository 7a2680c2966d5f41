/**
 * followCapsule in Chromium with a key, on the browser's own EventSource and the gateway's real
 * tickets (2 s long here), through a TCP proxy that kills every connection after 3 s, so every
 * reconnect happens after the ticket it had has expired: every record once, in order, and every
 * stream opened with a ticket the gateway accepts. Then with the page's clock 30 s behind the
 * gateway's, so the client believes an expired ticket is still good: the gateway refuses it once,
 * the client fetches a fresh one, and nothing is lost.
 */
import type { Page, Request, Response } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { followPageRig } from '../support/follow-page-rig.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { runBusy } from '../client/busy-capsule.js';
import { startCuttingProxy } from '../client/cutting-proxy.js';
import { loggedRecords } from '../client/log-frames.js';
import { hasBrowser } from './chromium.js';
import { PAGE_RECORDS } from './pages/follow-page.js';
import { run, startFollowing, waitForFrame } from './follow-driver.js';

declare const window: unknown;

const KEY = `key-observe-${'f'.repeat(24)}`;

interface Seen {
  /** Stream requests: the ticket each carried and the status it got (null: cut before an answer). */
  streams: { ticket: string | null; status: number | null }[];
  ticketPosts: number;
  /** Any URL that carried the key itself. */
  leaked: string[];
}

/** Watch the page's requests (the browser's view, EventSource included). */
const watch = (p: Page): Seen => {
  const seen: Seen = { streams: [], ticketPosts: 0, leaked: [] };
  const entries = new Map<Request, Seen['streams'][number]>();
  p.on('request', (r: Request) => {
    const url = new URL(r.url());
    if (r.url().includes(KEY)) seen.leaked.push(r.url());
    if (r.method() === 'POST' && url.pathname === '/auth/tickets') seen.ticketPosts++;
    if (url.pathname.endsWith('/records')) {
      const entry = { ticket: url.searchParams.get('ticket'), status: null };
      entries.set(r, entry);
      seen.streams.push(entry);
    }
  });
  p.on('response', (res: Response) => {
    const entry = entries.get(res.request());
    if (entry) entry.status = res.status();
  });
  return seen;
};

describe.skipIf(!hasBrowser)('followCapsule in Chromium with a key (EventSource + tickets)', () => {
  const rig = followPageRig();
  const setup = async () => {
    const { sim, gw } = await rig.start({
      extra: {
        auth: {
          apiKeys: [{ sha256: sha256Hex(KEY), owner: 'operator', scopes: ['observe'] }],
          ticketTtlMs: 2000,
        },
      },
    });
    const proxy = stopAfterTest(await startCuttingProxy(gw.baseUrl, { lifetimeMs: 3_000 }));
    return { sim, gw, proxy };
  };

  /** The page follows `alpha` with the key, on EventSource, through the proxy; its requests watched. */
  const followWithKey = async (options: { skewMs?: number } = {}) => {
    const { sim, proxy } = await setup();
    const seen = watch(rig.page);
    await startFollowing(rig.page, proxy.url, {
      capsule: 'alpha',
      transport: 'sse',
      token: KEY,
      useEventSource: true,
      ...options,
    });
    return { sim, proxy, seen };
  };

  /** The records the page delivered are the log's, from the start, once each, in order. */
  const expectExactLog = async (p: Page): Promise<number> => {
    const delivered = await run<{ offset: number }[]>(p, PAGE_RECORDS);
    expect(delivered).toEqual(await loggedRecords(rig.gw.core, 'alpha', delivered.at(-1)!.offset));
    return delivered.length;
  };

  const states = (p: Page) =>
    p.evaluate(() => (window as unknown as { __states: { state: string }[] }).__states);

  it(
    'reconnects after the ticket expired fetch a new one: none refused, every record once, in order',
    { timeout: 90_000 },
    async () => {
      const { sim, proxy, seen } = await followWithKey();
      // 12 tasks × 80 chunks at ≥ 8 ms each: at least 7.7 s of frames, so the 3 s connections are
      // cut at least twice however fast the machine is (8 tasks could finish inside two lifetimes).
      await waitForFrame(rig.page, await runBusy(sim, 12, 80, 8));
      expect(await expectExactLog(rig.page)).toBeGreaterThan(900);
      expect(proxy.kills).toBeGreaterThanOrEqual(2);
      const answered = seen.streams.filter((s) => s.status !== null);
      expect(answered.length).toBeGreaterThanOrEqual(2);
      expect(answered.every((s) => s.status === 200 && s.ticket?.startsWith('t1.'))).toBe(true);
      // Tickets live 2 s and connections 3 s: the later streams needed tickets fetched anew.
      expect(new Set(answered.map((s) => s.ticket)).size).toBeGreaterThanOrEqual(2);
      expect(seen.leaked).toEqual([]);
      expect(await states(rig.page)).not.toContainEqual(expect.objectContaining({ state: 'closed' }));
    },
  );

  it(
    'a page clock 30 s behind: an expired ticket it thought good is refused once, replaced, nothing lost',
    { timeout: 90_000 },
    async () => {
      const { sim, seen } = await followWithKey({ skewMs: -30_000 });
      await waitForFrame(rig.page, await runBusy(sim, 8, 80, 8));
      expect(await expectExactLog(rig.page)).toBeGreaterThan(600);
      const refused = seen.streams.filter((s) => s.status === 401);
      // The scenario happened (a reconnect with a ticket the gateway had expired)...
      expect(refused.length).toBeGreaterThanOrEqual(1);
      // ...and no ticket was refused twice: each refusal was followed by a fresh one.
      expect(new Set(refused.map((s) => s.ticket)).size).toBe(refused.length);
      expect(seen.leaked).toEqual([]);
      expect(await states(rig.page)).not.toContainEqual(expect.objectContaining({ state: 'closed' }));
    },
  );
});
