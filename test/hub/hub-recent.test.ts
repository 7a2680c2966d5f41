/**
 * The hub's recent-records memory: readers near the head (long-polls, reconnecting subscribers) are
 * answered without a store read each; older cursors and plain reads at the head still go to the store.
 */
import { describe, expect, it } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { collect, frames, offsetsOf, WrappedStore } from './helpers.js';

const setup = async (recentRecords = 100) => {
  const store = new WrappedStore(new MemoryStore());
  const hub = new Hub(store, { recentRecords, dissolveMs: 60_000 });
  await store.append('c', frames(0, 10)); // offsets 1..10, older than anything the tail reads
  // A subscriber keeps the channel's tail loop running; it has read once the live batch arrives.
  const keep = collect(hub, 'c', { after: 10 });
  return { store, hub, keep };
};

describe('hub recent records', () => {
  it('answers 200 long-polls near the head from memory, with exactly the store records', async () => {
    const { store, hub, keep } = await setup();
    await store.append('c', frames(10, 50)); // 11..60, read once by the tail loop
    await keep.until(60);
    const before = store.reads;
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => hub.waitAfter('c', 10 + (i % 50), 1000, 1000)),
    );
    expect(store.reads - before).toBe(0);
    for (const [i, r] of results.entries()) {
      const after = 10 + (i % 50);
      expect(offsetsOf(r.records)).toEqual(Array.from({ length: 60 - after }, (_, k) => after + 1 + k));
      expect(r.records.map((x) => (x as { data: string }).data)).toEqual(
        (await store.read('c', after, 1000)).records.map((x) => (x as { data: string }).data),
      );
    }
    keep.sub.close();
    await hub.close();
  });

  it('parks waiters at the head without a store read and wakes them with the next batch', async () => {
    const { store, hub, keep } = await setup();
    await store.append('c', frames(10, 5));
    await keep.until(15);
    const before = store.reads;
    const parked = Array.from({ length: 100 }, () => hub.waitAfter('c', 15, 1000, 10_000));
    await store.append('c', frames(15, 3));
    const results = await Promise.all(parked);
    for (const r of results) expect(offsetsOf(r.records)).toEqual([16, 17, 18]);
    expect(store.reads - before).toBe(0);
    keep.sub.close();
    await hub.close();
  });

  it('goes to the store for cursors older than memory and for plain reads at the head', async () => {
    const { store, hub, keep } = await setup(20);
    await store.append('c', frames(10, 50)); // memory keeps only 41..60
    await keep.until(60);
    let before = store.reads;
    const old = await hub.waitAfter('c', 5, 1000, 1000);
    expect(offsetsOf(old.records)[0]).toBe(6);
    expect(old.records).toHaveLength(55);
    expect(store.reads - before).toBe(1);

    before = store.reads;
    const recent = await hub.read('c', 45, 1000);
    expect(offsetsOf(recent.records)).toEqual(Array.from({ length: 15 }, (_, k) => 46 + k));
    expect(store.reads - before).toBe(0);

    // A plain read right after a write sees it, whether or not the tail loop has read it back yet.
    for (let n = 60; n < 80; n++) {
      await store.append('c', frames(n, 1));
      expect(offsetsOf((await hub.read('c', n, 10)).records)).toEqual([n + 1]);
    }
    keep.sub.close();
    await hub.close();
  });

  it('memory stays one contiguous run when retention trims records before the tail reads them', async () => {
    const store = new WrappedStore(new MemoryStore({ maxRecords: 5, maxAgeMs: 0 }));
    // A long dissolve keeps the channel (and its memory) between the waits below.
    const hub = new Hub(store, { recentRecords: 100, dissolveMs: 60_000 });
    const first = hub.waitAfter('c', 0, 1000, 5000); // parks on the empty log
    await store.append('c', frames(0, 1)); // 1, read live by the tail loop into memory
    expect(offsetsOf((await first).records)).toEqual([1]);
    const next = hub.waitAfter('c', 1, 1000, 5000);
    await store.append('c', frames(1, 15)); // 2..16: the store keeps 12..16 only
    expect(offsetsOf((await next).records)).toEqual([12, 13, 14, 15, 16]);
    // Memory must not pretend 1 and 12..16 are adjacent: a read after 10 gets 12..16, as the store.
    const page = await hub.waitAfter('c', 10, 1000, 1000);
    expect(offsetsOf(page.records)).toEqual([12, 13, 14, 15, 16]);
    await hub.close();
  });

  it('coalesces identical concurrent store reads: 100 waiters at one old cursor cost one read', async () => {
    const { store, hub, keep } = await setup(20);
    await store.append('c', frames(10, 50)); // memory keeps only 41..60; cursor 5 is older
    await keep.until(60);
    const before = store.reads;
    const results = await Promise.all(Array.from({ length: 100 }, () => hub.waitAfter('c', 5, 1000, 1000)));
    expect(store.reads - before).toBe(1);
    for (const r of results)
      expect(offsetsOf(r.records)).toEqual(Array.from({ length: 55 }, (_, k) => 6 + k));
    keep.sub.close();
    await hub.close();
  });

  it('a subscriber that joins near the head catches up from memory, then follows live', async () => {
    const { store, hub, keep } = await setup();
    await store.append('c', frames(10, 40));
    await keep.until(50);
    const before = store.reads;
    const late = collect(hub, 'c', { after: 30 });
    await late.until(50);
    await store.append('c', frames(50, 5));
    await late.until(55);
    expect(offsetsOf(late.records)).toEqual(Array.from({ length: 25 }, (_, k) => 31 + k));
    expect(store.reads - before).toBe(0);
    late.sub.close();
    keep.sub.close();
    await hub.close();
  });
});
