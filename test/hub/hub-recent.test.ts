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
  // Offsets start above a time floor: every offset below is counted from the log's base.
  const base = (await store.position('c')).head;
  await store.append('c', frames(0, 10)); // offsets base+1..base+10, older than anything the tail reads
  // A subscriber keeps the channel's tail loop running; it has read once the live batch arrives.
  const keep = collect(hub, 'c', { after: base + 10 });
  return { store, hub, keep, base };
};

describe('hub recent records', () => {
  it('answers 200 long-polls near the head from memory, with exactly the store records', async () => {
    const { store, hub, keep, base } = await setup();
    await store.append('c', frames(10, 50)); // base+11..base+60, read once by the tail loop
    await keep.until(base + 60);
    const before = store.reads;
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => hub.waitAfter('c', base + 10 + (i % 50), 1000, 1000)),
    );
    expect(store.reads - before).toBe(0);
    for (const [i, r] of results.entries()) {
      const after = 10 + (i % 50);
      expect(offsetsOf(r.records)).toEqual(
        Array.from({ length: 60 - after }, (_, k) => base + after + 1 + k),
      );
      expect(r.records.map((x) => (x as { data: string }).data)).toEqual(
        (await store.read('c', base + after, 1000)).records.map((x) => (x as { data: string }).data),
      );
    }
    keep.sub.close();
    await hub.close();
  });

  it('parks waiters at the head without a store read and wakes them with the next batch', async () => {
    const { store, hub, keep, base } = await setup();
    await store.append('c', frames(10, 5));
    await keep.until(base + 15);
    const before = store.reads;
    const parked = Array.from({ length: 100 }, () => hub.waitAfter('c', base + 15, 1000, 10_000));
    await store.append('c', frames(15, 3));
    const results = await Promise.all(parked);
    for (const r of results) expect(offsetsOf(r.records)).toEqual([base + 16, base + 17, base + 18]);
    expect(store.reads - before).toBe(0);
    keep.sub.close();
    await hub.close();
  });

  it('goes to the store for cursors older than memory and for plain reads at the head', async () => {
    const { store, hub, keep, base } = await setup(20);
    await store.append('c', frames(10, 50)); // memory keeps only base+41..base+60
    await keep.until(base + 60);
    let before = store.reads;
    const old = await hub.waitAfter('c', base + 5, 1000, 1000);
    expect(offsetsOf(old.records)[0]).toBe(base + 6);
    expect(old.records).toHaveLength(55);
    expect(store.reads - before).toBe(1);

    before = store.reads;
    const recent = await hub.read('c', base + 45, 1000);
    expect(offsetsOf(recent.records)).toEqual(Array.from({ length: 15 }, (_, k) => base + 46 + k));
    expect(store.reads - before).toBe(0);

    // A plain read right after a write sees it, whether or not the tail loop has read it back yet.
    for (let n = 60; n < 80; n++) {
      await store.append('c', frames(n, 1));
      expect(offsetsOf((await hub.read('c', base + n, 10)).records)).toEqual([base + n + 1]);
    }
    keep.sub.close();
    await hub.close();
  });

  it('memory stays one contiguous run when retention trims records before the tail reads them', async () => {
    const store = new WrappedStore(new MemoryStore({ maxRecords: 5, maxAgeMs: 0 }));
    // A long dissolve keeps the channel (and its memory) between the waits below.
    const hub = new Hub(store, { recentRecords: 100, dissolveMs: 60_000 });
    const base = (await store.position('c')).head; // offsets start above a time floor, not at 1
    const at = (...rel: number[]): number[] => rel.map((n) => base + n);
    const first = hub.waitAfter('c', 0, 1000, 5000); // parks on the empty log
    await store.append('c', frames(0, 1)); // base+1, read live by the tail loop into memory
    expect(offsetsOf((await first).records)).toEqual(at(1));
    const next = hub.waitAfter('c', base + 1, 1000, 5000);
    await store.append('c', frames(1, 15)); // base+2..16: the store keeps base+12..16 only
    expect(offsetsOf((await next).records)).toEqual(at(12, 13, 14, 15, 16));
    // Memory must not pretend 1 and 12..16 are adjacent: a read after 10 gets 12..16, as the store.
    const page = await hub.waitAfter('c', base + 10, 1000, 1000);
    expect(offsetsOf(page.records)).toEqual(at(12, 13, 14, 15, 16));
    await hub.close();
  });

  it('coalesces identical concurrent store reads: 100 waiters at one old cursor cost one read', async () => {
    const { store, hub, keep, base } = await setup(20);
    await store.append('c', frames(10, 50)); // memory keeps only base+41..base+60; cursor base+5 is older
    await keep.until(base + 60);
    const before = store.reads;
    const results = await Promise.all(
      Array.from({ length: 100 }, () => hub.waitAfter('c', base + 5, 1000, 1000)),
    );
    expect(store.reads - before).toBe(1);
    for (const r of results)
      expect(offsetsOf(r.records)).toEqual(Array.from({ length: 55 }, (_, k) => base + 6 + k));
    keep.sub.close();
    await hub.close();
  });

  it('a subscriber that joins near the head catches up from memory, then follows live', async () => {
    const { store, hub, keep, base } = await setup();
    await store.append('c', frames(10, 40));
    await keep.until(base + 50);
    const before = store.reads;
    const late = collect(hub, 'c', { after: base + 30 });
    await late.until(base + 50);
    await store.append('c', frames(50, 5));
    await late.until(base + 55);
    expect(offsetsOf(late.records)).toEqual(Array.from({ length: 25 }, (_, k) => base + 31 + k));
    expect(store.reads - before).toBe(0);
    late.sub.close();
    keep.sub.close();
    await hub.close();
  });

  it('memory stays one contiguous run when one tail batch spans a new epoch (offsets jump)', async () => {
    // The tail's wait is held until both epochs are written, so its one batch holds both.
    let open: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (open = resolve));
    class Held extends MemoryStore {
      override waitAfter(...args: Parameters<MemoryStore['waitAfter']>) {
        return held.then(() => super.waitAfter(...args));
      }
    }
    const store = new Held();
    const hub = new Hub(store, { recentRecords: 100, dissolveMs: 60_000 });
    const base = (await store.position('c')).head;
    const keep = collect(hub, 'c', { after: base });
    await store.append('c', frames(0, 10));
    const reset = await store.append('c', [], { floor: base + 1_000 });
    await store.append('c', frames(10, 5));
    const fact = reset.offsets[0]!;
    open();
    await keep.until(fact + 5);
    const all = (await store.read('c', 0, 1000)).records;
    for (const after of [base + 3, base + 10, fact - 1, fact, fact + 2]) {
      const expected = offsetsOf(all.filter((r) => r.offset > after));
      expect(offsetsOf((await hub.waitAfter('c', after, 1000, 1000)).records)).toEqual(expected);
      expect(offsetsOf((await hub.read('c', after, 1000)).records)).toEqual(expected);
    }
    keep.sub.close();
    await hub.close();
  });
});
