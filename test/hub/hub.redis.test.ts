/** The hub over the Redis store: one XREAD tail per capsule, the catch-up seam, waits, a lost log. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import type { FactEntry } from '../../src/log/record.js';
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
    const base = (await store.position(capsule)).head; // offsets start above a time floor, not at 1
    await appendInBatches(store, capsule, 1000, 100);
    const yieldEach = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    const afters = [0, 1, 500, 999, 1000]; // relative to base; 0 stays 0 ("no cursor")
    const subs = afters.map((after) =>
      collect(hub, capsule, { after: after === 0 ? 0 : base + after, onBatch: yieldEach }),
    );
    const extra = Array.from({ length: 20 }, () => collect(hub, capsule, { after: base + 1000 }));
    await appendInBatches(store, capsule, 1000, 7);
    await Promise.all([...subs, ...extra].map((s) => s.until(base + 2000)));

    const stored = (await store.read(capsule, 0, 5000)).records;
    expect(stored).toHaveLength(2000);
    for (const [i, after] of afters.entries()) {
      expect(offsetsOf(subs[i]!.records)).toEqual(range(base + after + 1, base + 2000));
      expect(subs[i]!.records).toEqual(stored.slice(after));
    }
    for (const s of extra) expect(offsetsOf(s.records)).toEqual(range(base + 1001, base + 2000));
    expect(hub.stats().tailLoops).toBe(1);
    expect(hub.capsuleStats(capsule).subscribers).toBe(25);
  });

  it('parks a waiter until the next append and forgets an aborted one', async () => {
    const { store, hub } = setup();
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await store.append(capsule, frames(1, 2));
    const parked = hub.waitAfter(capsule, base + 2, 10, 20_000);
    const controller = new AbortController();
    const aborted = hub.waitAfter(capsule, base + 2, 10, 20_000, controller.signal);
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).waiters).toBe(2));
    controller.abort();
    expect(await aborted).toMatchObject({ records: [], timedOut: false });
    expect(hub.capsuleStats(capsule).waiters).toBe(1);
    await store.append(capsule, frames(3, 1));
    expect(offsetsOf((await parked).records)).toEqual([base + 3]);
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
  });

  // A deleted log no longer takes the head below a cursor (the new epoch starts above a time floor);
  // a Redis restarted from an older snapshot does, until the writer's floor fences it.
  it('ends subscribers with "store_error" when Redis comes back from an older snapshot, and follows the new epoch', async () => {
    const { store, hub } = setup();
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await store.append(capsule, frames(1, 2));
    const redis = new Redis(url!);
    const { log, meta } = store.keys(capsule);
    const snapshot = [await redis.dumpBuffer(log), await redis.dumpBuffer(meta)] as const;
    await store.append(capsule, frames(3, 3));
    const old = collect(hub, capsule);
    await old.until(base + 5);
    const before = await store.position(capsule);
    await redis.restore(log, 0, snapshot[0]!, 'REPLACE');
    await redis.restore(meta, 0, snapshot[1]!, 'REPLACE');
    await redis.quit();
    expect(await old.ended).toBe('store_error');
    // The writer's floor (the head it saw durable) fences the regression with a new epoch.
    const resetFact: FactEntry = {
      kind: 'fact',
      fact: 'frames-possibly-missing',
      reason: 'store-reset',
      receivedAt: Date.now(),
    };
    const reset = await store.append(capsule, frames(6, 1), { floor: before.head, resetFact });
    expect(reset.reset).toBe(true);
    expect(reset.epoch).not.toBe(before.epoch);
    const r = reset.offsets[0]!;
    expect(r).toBeGreaterThan(before.head);

    const fresh = collect(hub, capsule);
    await fresh.until(r);
    await store.append(capsule, frames(6, 1), { floor: r });
    await fresh.until(r + 1);
    expect(offsetsOf(fresh.records)).toEqual([base + 1, base + 2, r, r + 1]);
  });
});
