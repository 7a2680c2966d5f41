/**
 * followMany in Chromium: a page follows 50 streams (a capsule's log and 49 general Durable Streams)
 * over one connection, through a proxy that kills idle connections and through one that cuts every
 * connection each second, and gets every event of every stream once, in order; a reload resumes
 * every stream exactly from the cursors it kept.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { followPageRig } from '../support/follow-page-rig.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { runBusy } from '../client/busy-capsule.js';
import { startCuttingProxy } from '../client/cutting-proxy.js';
import { loggedRecords } from '../client/log-frames.js';
import { hasBrowser } from './chromium.js';
import { PAGE_EVENTS, PAGE_FOLLOW_MANY } from './pages/follow-many-page.js';
import { reloadTwiceMidStream, run } from './follow-driver.js';

declare const window: unknown;

const DS_STREAMS = 49;
const ROUNDS = 12;

interface Delivered {
  stream: string;
  cursor: string;
  event: string;
  data: unknown;
}

describe.skipIf(!hasBrowser)('followMany in Chromium', () => {
  const rig = followPageRig();
  const dsKeys = Array.from({ length: DS_STREAMS }, (_, i) => `ds:fleet/s${i}`);
  const streams = Object.fromEntries([['murmur:alpha', '-1'], ...dsKeys.map((k) => [k, '-1'])]);

  const setup = async () => {
    const { sim, gw } = await rig.start({
      extra: { durableStreams: { writable: true } },
      tuning: { streams: { keyPrefix: `test:follow-many:${randomUUID()}` } },
    });
    for (const key of dsKeys) {
      const res = await fetch(`${gw.baseUrl}/v1/stream/${key.slice(3)}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).toBe(201);
    }
    return { sim, gw };
  };

  /** ROUNDS messages to each general stream, round after round, while the capsule works. */
  const writeAll = async (base: string, pauseMs: number, rounds = ROUNDS): Promise<void> => {
    for (let round = 0; round < rounds; round++) {
      await Promise.all(
        dsKeys.map(async (key, i) => {
          const res = await fetch(`${base}/v1/stream/${key.slice(3)}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify([{ stream: i, round }]),
          });
          expect(res.status).toBe(204);
        }),
      );
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  };

  const open = async (base: string, transport: 'auto' | 'sse' | 'long-poll') => {
    for (let i = 0; ; i++) {
      try {
        await rig.page.goto(`${base}/healthz`);
        break;
      } catch (err) {
        if (i >= 10) throw err; // a proxy cut the navigation itself
      }
    }
    await run(rig.page, PAGE_FOLLOW_MANY, { streams, transport });
  };

  /** Wait until the page has every message of every general stream and the capsule's last record. */
  const expectEverything = async (lastOffset: number, rounds = ROUNDS): Promise<Delivered[]> => {
    let delivered: Delivered[] = [];
    const done = () =>
      dsKeys.every((k) => delivered.filter((d) => d.stream === k).length >= rounds) &&
      delivered.some(
        (d) => d.stream === 'murmur:alpha' && (d.data as { offset: number }).offset >= lastOffset,
      );
    await expect
      .poll(
        async () => {
          delivered = await run<Delivered[]>(rig.page, PAGE_EVENTS);
          return done();
        },
        { timeout: 60_000, interval: 250 },
      )
      .toBe(true);
    for (const [i, key] of dsKeys.entries())
      expect(delivered.filter((d) => d.stream === key).map((d) => d.data)).toEqual(
        Array.from({ length: rounds }, (_, round) => ({ stream: i, round })),
      );
    const records = delivered.filter((d) => d.stream === 'murmur:alpha').map((d) => d.data);
    expect(records).toEqual(await loggedRecords(rig.gw.core, 'alpha', lastOffset));
    return delivered;
  };

  const lastLogged = async (data: string): Promise<number> => {
    let at = -1;
    await expect
      .poll(
        async () =>
          (at =
            ((await loggedRecords(rig.gw.core, 'alpha')).findLast((r) => r.data === data)
              ?.offset as number) ?? -1),
        { timeout: 20_000, interval: 50 },
      )
      .toBeGreaterThan(0);
    return at;
  };

  it(
    '50 streams through a proxy that kills connections idle 1 s: every event once, in order, over one connection',
    { timeout: 120_000 },
    async () => {
      const { sim, gw } = await setup();
      const proxy = stopAfterTest(await startCuttingProxy(gw.baseUrl, { idleMs: 1_000 }));
      await open(proxy.url, 'auto');
      // Quiet longer than the proxy's idle bound between rounds: the SSE stream is cut while idle.
      const [last] = await Promise.all([runBusy(sim, 3, 30, 5), writeAll(gw.baseUrl, 1_500, 6)]);
      await expectEverything(await lastLogged(last.data), 6);
      expect(proxy.kills).toBeGreaterThanOrEqual(2);
      const states = await rig.page.evaluate(
        () => (window as unknown as { __states: { state: string; transport: string }[] }).__states,
      );
      expect(states).toContainEqual(expect.objectContaining({ state: 'fallback', transport: 'long-poll' }));
      // One connection for the 50 streams (beside the page's own, which the proxy cuts when idle).
      expect(proxy.maxOpen).toBeLessThanOrEqual(3);
    },
  );

  it(
    '50 streams through a proxy that cuts every connection each second: every event once, in order',
    { timeout: 120_000 },
    async () => {
      const { sim, gw } = await setup();
      const proxy = stopAfterTest(await startCuttingProxy(gw.baseUrl, { lifetimeMs: 1_000 }));
      await open(proxy.url, 'auto');
      const [last] = await Promise.all([runBusy(sim, 3, 30, 5), writeAll(gw.baseUrl, 250)]);
      await expectEverything(await lastLogged(last.data));
      expect(proxy.kills).toBeGreaterThanOrEqual(2);
      expect(proxy.maxOpen).toBeLessThanOrEqual(3);
    },
  );

  it(
    'a reload resumes every stream from the cursors kept in sessionStorage, without a duplicate',
    { timeout: 120_000 },
    async () => {
      const { sim, gw } = await setup();
      await open(gw.baseUrl, 'auto');
      const work = Promise.all([runBusy(sim, 3, 30, 5), writeAll(gw.baseUrl, 300)]);
      await reloadTwiceMidStream(rig.page, {
        more: 60,
        script: PAGE_FOLLOW_MANY,
        args: { streams, transport: 'auto' },
      });
      const [last] = await work;
      await expectEverything(await lastLogged(last.data));
    },
  );
});
