/** The hub over the Redis store: one XREAD tail per capsule, the catch-up seam, waits, a lost log. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { appendInBatches, collect, frames, offsetsOf } from './helpers.js';

const url = testRedisUrl();
const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const setup = (): { store: RedisStore; hub: Hub } => {
  const store = new RedisStore(url!, { keyPrefix: `hub-${randomUUID().slice(0, 8)}` });
  const hub = new Hub(store, { pageSize: 64, dissolveMs: 10, tailWaitMs: 500 });
  cleanups.push(async () => {
    await hub.close();
    await store.close();
  });
  return { store, hub };
};

describe.skipIf(!url)('hub over RedisStore', () => {
  it('delivers every record once, in order, to subscribers racing the appends, via one tail loop', async () => {
    const { store, hub } = setup();
    const capsule = uniqueCapsule();
    await appendInBatches(store, capsule, 1000, 100);
    const yieldEach = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    const afters = [0, 1, 500, 999, 1000];
    const subs = afters.map((after) => collect(hub, capsule, { after, onBatch: yieldEach }));
    const extra = Array.from({ length: 20 }, () => collect(hub, capsule, { after: 1000 }));
    await appendInBatches(store, capsule, 1000, 7);
    await Promise.all([...subs, ...extra].map((s) => s.until(2000)));

    const stored = (await store.read(capsule, 0, 5000)).records;
    expect(stored).toHaveLength(2000);
    for (const [i, after] of afters.entries()) {
      expect(offsetsOf(subs[i]!.records)).toEqual(range(after + 1, 2000));
      expect(subs[i]!.records).toEqual(stored.slice(after));
    }
    for (const s of extra) expect(offsetsOf(s.records)).toEqual(range(1001, 2000));
    expect(hub.stats().tailLoops).toBe(1);
    expect(hub.capsuleStats(capsule).subscribers).toBe(25);
  });

  it('parks a waiter until the next append and forgets an aborted one', async () => {
    const { store, hub } = setup();
    const capsule = uniqueCapsule();
    await store.append(capsule, frames(1, 2));
    const parked = hub.waitAfter(capsule, 2, 10, 20_000);
    const controller = new AbortController();
    const aborted = hub.waitAfter(capsule, 2, 10, 20_000, controller.signal);
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).waiters).toBe(2));
    controller.abort();
    expect(await aborted).toMatchObject({ records: [], timedOut: false });
    expect(hub.capsuleStats(capsule).waiters).toBe(1);
    await store.append(capsule, frames(3, 1));
    expect(offsetsOf((await parked).records)).toEqual([3]);
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
  });

  it('ends subscribers with "store_error" when the Redis log is deleted, and follows the new epoch', async () => {
    const { store, hub } = setup();
    const capsule = uniqueCapsule();
    await store.append(capsule, frames(1, 5));
    const old = collect(hub, capsule);
    await old.until(5);
    const before = await store.position(capsule);
    const redis = new Redis(url!);
    const { log, meta } = store.keys(capsule);
    await redis.del(log, meta);
    await redis.quit();
    await store.append(capsule, frames(1, 2));
    expect(await old.ended).toBe('store_error');
    expect((await store.position(capsule)).epoch).not.toBe(before.epoch);

    const fresh = collect(hub, capsule);
    await fresh.until(2);
    await store.append(capsule, frames(3, 1));
    await fresh.until(3);
    expect(offsetsOf(fresh.records)).toEqual([1, 2, 3]);
  });
});
