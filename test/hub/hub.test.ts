/** The hub over the embedded store: one reader per capsule, seamless catch-up, bounded queues, waits. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Hub, type HubOptions } from '../../src/hub/hub.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogStore } from '../../src/log/store.js';
import { uniqueCapsule } from '../support/redis.js';
import { appendInBatches, collect, frames, gate, offsetsOf, WrappedStore } from './helpers.js';

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

const hubs: Hub[] = [];
const gates: (() => void)[] = [];
const makeHub = (store: LogStore, options: HubOptions = {}): Hub => {
  const hub = new Hub(store, { dissolveMs: 10, tailWaitMs: 5_000, ...options });
  hubs.push(hub);
  return hub;
};

afterEach(async () => {
  for (const open of gates.splice(0)) open();
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

/**
 * Subscribers of an empty log are live once the channel's tail loop is parked in the store: their
 * catch-up is answered from the channel's memory in microtasks, all run before the next setImmediate.
 */
const untilLive = async (store: WrappedStore, capsule: string): Promise<void> => {
  await vi.waitFor(() => expect(store.inFlightWaits.get(capsule)).toBe(1));
  await new Promise((resolve) => setImmediate(resolve));
};

describe('fan-out', () => {
  it('reads each capsule with one tail loop however many subscribers, and stops it after the last leaves', async () => {
    const store = new WrappedStore(new MemoryStore());
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const other = uniqueCapsule();
    const base = (await store.position(capsule)).head; // offsets start above a time floor, not at 1
    const subs = Array.from({ length: 50 }, () => collect(hub, capsule));
    const otherSub = collect(hub, other);
    await vi.waitFor(() => expect(store.inFlightWaits.get(capsule)).toBe(1));

    expect(hub.stats().tailLoops).toBe(2);
    expect(hub.capsuleStats(capsule)).toEqual({ subscribers: 50, waiters: 0, tailLoop: true });
    await appendInBatches(store, capsule, 1000, 7);
    await Promise.all(subs.map((s) => s.until(base + 1000)));
    for (const s of subs) expect(offsetsOf(s.records)).toEqual(range(base + 1, base + 1000));
    expect(store.maxConcurrentWaits).toBe(1); // never two readers of one capsule at once

    for (const s of subs) s.sub.close();
    for (const s of subs) expect(await s.ended).toBe('closed');
    expect(hub.capsuleStats(capsule).subscribers).toBe(0);
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).tailLoop).toBe(false));
    expect(hub.stats().tailLoops).toBe(1); // the other capsule's reader is unaffected
    otherSub.sub.close();
    await vi.waitFor(() => expect(hub.stats().tailLoops).toBe(0));
    expect(store.inFlightWaits.get(capsule)).toBe(0);
  });

  it('hands the same batch array to every live subscriber', async () => {
    const store = new WrappedStore(new MemoryStore());
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    const a = collect(hub, capsule);
    const b = collect(hub, capsule);
    // Both are live once the tail loop waits in the store and their (empty, in-memory) catch-up ran.
    await untilLive(store, capsule);
    await store.append(capsule, frames(0, 3));
    await Promise.all([a.until(base + 3), b.until(base + 3)]);
    expect(a.batches).toHaveLength(1);
    expect(a.batches[0]).toBe(b.batches[0]);
  });
});

describe('catch-up and the live seam', () => {
  it('delivers every record exactly once, in order, while appends race the catch-up', async () => {
    const store = new MemoryStore();
    const hub = makeHub(store, { pageSize: 64 });
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await appendInBatches(store, capsule, 2000, 100);
    // Slow-ish async writers make the catch-up overlap the live appends.
    const yieldEach = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    // Cursors relative to the log's base; 0 stays 0 ("no cursor").
    const cursor = (rel: number): number => (rel === 0 ? 0 : base + rel);
    const subs = [0, 1, 500, 1999, 2000].map((rel) =>
      collect(hub, capsule, { after: cursor(rel), onBatch: yieldEach }),
    );
    await appendInBatches(store, capsule, 2000, 3);
    await Promise.all(subs.map((s) => s.until(base + 4000)));

    const stored = (await store.read(capsule, 0, 10_000)).records;
    expect(stored).toHaveLength(4000);
    for (const [i, after] of [0, 1, 500, 1999, 2000].entries()) {
      const s = subs[i]!;
      expect(offsetsOf(s.records)).toEqual(range(base + after + 1, base + 4000));
      expect(s.records).toEqual(stored.slice(after));
      expect(s.endReason).toBeNull();
    }
  });

  it('keeps catching up from the store when live batches overflow its queue before it is caught up', async () => {
    const store = new MemoryStore();
    const hub = makeHub(store, { pageSize: 100 });
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await appendInBatches(store, capsule, 1000, 100);
    const held = gate();
    gates.push(held.open);
    let first = true;
    const slowStart = collect(hub, capsule, {
      maxQueuedRecords: 50,
      onBatch: () => {
        if (!first) return;
        first = false;
        return held.promise; // stuck on its first catch-up page
      },
    });
    const witness = collect(hub, capsule, { after: base + 1000 });
    await slowStart.until(base + 100);
    await appendInBatches(store, capsule, 500, 10); // 500 live records > 50 queued
    await witness.until(base + 1500); // the tail loop has pushed every live batch to both
    held.open();
    await slowStart.until(base + 1500);
    expect(offsetsOf(slowStart.records)).toEqual(range(base + 1, base + 1500));
    expect(slowStart.endReason).toBeNull();
  });

  it('starts from the first retained record when the cursor is older than retention', async () => {
    const store = new MemoryStore({ maxRecords: 100, maxAgeMs: 0 });
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await appendInBatches(store, capsule, 300, 50);
    const s = collect(hub, capsule, { after: base + 10 });
    await s.until(base + 300);
    expect(offsetsOf(s.records)).toEqual(range(base + 201, base + 300));
  });
});

describe('slow subscribers', () => {
  it('ends a live subscriber past its queue bound with "slow" while a fast one gets everything', async () => {
    const store = new WrappedStore(new MemoryStore());
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const stuck = gate();
    gates.push(stuck.open);
    const base = (await store.position(capsule)).head;
    const slow = collect(hub, capsule, { maxQueuedRecords: 20, onBatch: () => stuck.promise });
    const fast = collect(hub, capsule, { maxQueuedRecords: 20 });
    await untilLive(store, capsule); // both caught up (the log is empty): live
    await appendInBatches(store, capsule, 200, 5);
    await fast.until(base + 200);

    expect(await slow.ended).toBe('slow');
    expect(offsetsOf(fast.records)).toEqual(range(base + 1, base + 200));
    expect(fast.endReason).toBeNull();
    // What the slow one did get is a gap-free prefix: it resumes from its cursor.
    expect(offsetsOf(slow.records)).toEqual(range(base + 1, base + slow.records.length));
    expect(hub.capsuleStats(capsule).subscribers).toBe(1);
  });
});

describe('falling behind retention', () => {
  it('ends a subscriber with "slow" when retention trims records it has not read yet', async () => {
    const store = new MemoryStore({ maxRecords: 50, maxAgeMs: 0 });
    const hub = makeHub(store, { pageSize: 10 });
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await appendInBatches(store, capsule, 50, 50);
    const held = gate();
    gates.push(held.open);
    const s = collect(hub, capsule, { onBatch: () => held.promise });
    await s.until(base + 10);
    await appendInBatches(store, capsule, 100, 10); // trims base+1..base+100 while it is stuck at base+10
    held.open();
    expect(await s.ended).toBe('slow');
    expect(offsetsOf(s.records)).toEqual(range(base + 1, base + 10));
  });
});

describe('ending subscriptions', () => {
  it('ends with "closed" when the signal aborts, and with "shutdown" on close()', async () => {
    const store = new MemoryStore();
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const controller = new AbortController();
    const aborted = collect(hub, capsule, { signal: controller.signal });
    const pre = new AbortController();
    pre.abort();
    const preAborted = collect(hub, capsule, { signal: pre.signal });
    const drained = collect(hub, capsule);
    const parked = hub.waitAfter(capsule, 0, 10, 20_000);
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).waiters).toBe(1));
    controller.abort();
    expect(await aborted.ended).toBe('closed');
    expect(await preAborted.ended).toBe('closed');

    await hub.close();
    expect(await drained.ended).toBe('shutdown');
    expect(await parked).toMatchObject({ records: [], timedOut: false });
    expect(hub.stats()).toMatchObject({ tailLoops: 0, subscribers: 0, waiters: 0, capsules: {} });
    expect(await collect(hub, capsule).ended).toBe('shutdown');
  });

  it('ends with "store_error" when a catch-up read fails', async () => {
    const store = new WrappedStore(new MemoryStore());
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    await store.append(capsule, frames(0, 10));
    store.failReads = true;
    const s = collect(hub, capsule);
    expect(await s.ended).toBe('store_error');
    expect(s.records).toEqual([]);
  });

  it('ends subscribers of the old epoch with "store_error" when the store comes back below their cursor', async () => {
    // A store that lost the log now starts its new epoch above every offset it handed out (a time
    // floor), so only a store that came back older (not fenced yet) leaves a cursor beyond its head.
    // The replacement log is created first, so its offsets (time floor) are below the current log's.
    const capsule = uniqueCapsule();
    const older = new MemoryStore();
    const olderBase = (await older.position(capsule)).head;
    const store = new WrappedStore(new MemoryStore(), () => older);
    const hub = makeHub(store, { tailWaitMs: 20 });
    await store.append(capsule, frames(0, 5));
    const base = (await store.position(capsule)).head - 5;
    expect(olderBase + 2).toBeLessThan(base + 5);
    const old = collect(hub, capsule);
    await old.until(base + 5);
    const oldEpoch = (await hub.position(capsule)).epoch;
    const parked = hub.waitAfter(capsule, base + 5, 10, 20_000);
    store.loseLog();
    await store.append(capsule, frames(0, 2));

    expect(await old.ended).toBe('store_error');
    const woke = await parked;
    expect(woke.records).toEqual([]);
    expect(woke.position.epoch).not.toBe(oldEpoch);
    // A new subscriber follows the new epoch from its start.
    const fresh = collect(hub, capsule);
    await fresh.until(olderBase + 2);
    await store.append(capsule, frames(2, 1));
    await fresh.until(olderBase + 3);
    expect(offsetsOf(fresh.records)).toEqual([olderBase + 1, olderBase + 2, olderBase + 3]);
  });
});

describe('waitAfter', () => {
  it('answers at once when records exist after the cursor, up to the limit', async () => {
    const store = new MemoryStore();
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await store.append(capsule, frames(0, 10));
    const result = await hub.waitAfter(capsule, base + 3, 4, 20_000);
    expect(result.timedOut).toBe(false);
    expect(offsetsOf(result.records)).toEqual([base + 4, base + 5, base + 6, base + 7]);
    expect(result.position.head).toBe(base + 10);
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
  });

  it('parks until the next append, shared by many waiters on one tail loop', async () => {
    const store = new WrappedStore(new MemoryStore());
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await store.append(capsule, frames(0, 2));
    const waits = Array.from({ length: 20 }, () => hub.waitAfter(capsule, base + 2, 100, 20_000));
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).waiters).toBe(20));
    await vi.waitFor(() => expect(store.inFlightWaits.get(capsule)).toBe(1));
    await store.append(capsule, frames(2, 3));
    const results = await Promise.all(waits);
    for (const r of results) {
      expect(r.timedOut).toBe(false);
      expect(offsetsOf(r.records)).toEqual([base + 3, base + 4, base + 5]);
    }
    expect(results[0]!.records[0]).toBe(results[1]!.records[0]); // one read, shared record objects
    expect(store.maxConcurrentWaits).toBe(1);
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
  });

  it('times out with no records and the position unchanged', async () => {
    const store = new MemoryStore();
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    await store.append(capsule, frames(0, 3));
    const result = await hub.waitAfter(capsule, base + 3, 10, 30);
    expect(result).toMatchObject({ records: [], timedOut: true, position: { head: base + 3 } });
    const zero = await hub.waitAfter(capsule, base + 3, 10, 0);
    expect(zero).toMatchObject({ records: [], timedOut: true });
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
  });

  it('removes aborted waiters at once: the waiter count returns to 0', async () => {
    const store = new MemoryStore();
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const controllers = Array.from({ length: 100 }, () => new AbortController());
    const waits = controllers.map((c) => hub.waitAfter(capsule, 0, 10, 60_000, c.signal));
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).waiters).toBe(100));
    for (const c of controllers) c.abort();
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
    for (const r of await Promise.all(waits)) expect(r).toMatchObject({ records: [], timedOut: false });
    const pre = new AbortController();
    pre.abort();
    expect(await hub.waitAfter(capsule, 0, 10, 60_000, pre.signal)).toMatchObject({ records: [] });
    expect(hub.capsuleStats(capsule).waiters).toBe(0);
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).tailLoop).toBe(false));
  });
});

describe('cursorStatus', () => {
  it('says gone below retention, ok within it, ahead beyond the head', async () => {
    const store = new MemoryStore({ maxRecords: 10, maxAgeMs: 0 });
    const hub = makeHub(store);
    const capsule = uniqueCapsule();
    const base = (await store.position(capsule)).head;
    expect((await hub.cursorStatus(capsule, 0)).status).toBe('ok');
    expect((await hub.cursorStatus(capsule, base)).status).toBe('ok');
    expect((await hub.cursorStatus(capsule, base + 1)).status).toBe('ahead');
    await store.append(capsule, frames(0, 30));
    const status = async (after: number): Promise<string> => (await hub.cursorStatus(capsule, after)).status;
    // 0 is "no cursor" (reads what is retained, see cursorStatusAt); a cursor before the log's first
    // record is gone once retention trimmed past it.
    expect(await status(0)).toBe('ok');
    expect(await status(base)).toBe('gone');
    expect(await status(base + 19)).toBe('gone');
    expect(await status(base + 20)).toBe('ok');
    expect(await status(base + 30)).toBe('ok');
    expect(await status(base + 31)).toBe('ahead');
    expect((await hub.cursorStatus(capsule, base + 25)).position).toMatchObject({
      head: base + 30,
      first: base + 21,
    });
  });
});
