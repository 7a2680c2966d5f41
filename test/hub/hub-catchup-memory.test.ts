/**
 * The hub's memory serves catch-up too (the resume storm): on a gateway that starts cold, the
 * log before its tail loop started is only in the store; what one reader's catch-up brings from it
 * is kept, so the next readers of that range get the same record objects with no store read. Memory
 * never stands in for what the store no longer holds: a new epoch clears it, a read from before a
 * reset is not kept, and retention trimming is still reported as it is without memory.
 */
import { describe, expect, it } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import type { LogRecord } from '../../src/log/record.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogPosition, ReadResult } from '../../src/log/store.js';
import type { LogEntry } from '../../src/log/record.js';
import { collect, frames, gate, offsetsOf, WrappedStore } from './helpers.js';

/** A new epoch's log opens with the store-reset fact, as a real store's does. */
const RESET: LogEntry = {
  kind: 'fact',
  fact: 'frames-possibly-missing',
  reason: 'store-reset',
  receivedAt: 0,
};

const range = (from: number, count: number): number[] => Array.from({ length: count }, (_, k) => from + k);

/** A log of `count` records written before the hub exists (a cold gateway), and the hub. */
const cold = async (count: number, options: ConstructorParameters<typeof Hub>[1] = {}) => {
  const store = new WrappedStore(new MemoryStore());
  const base = (await store.position('c')).head;
  await store.append('c', frames(0, count));
  const hub = new Hub(store, { pageSize: 100, dissolveMs: 60_000, ...options });
  return { store, hub, base };
};

describe('hub memory for catch-up', () => {
  it('after a cold start, readers of one old range after the first cost no store read and share objects', async () => {
    const { store, hub, base } = await cold(1000);
    const first = collect(hub, 'c', { after: base });
    await first.until(base + 1000);
    const reads = store.reads;
    // Subscribers one after another (never coalesced in flight), long-polls and plain reads.
    const later: LogRecord[][] = [];
    for (let i = 0; i < 5; i++) {
      const sub = collect(hub, 'c', { after: base });
      await sub.until(base + 1000);
      sub.sub.close();
      later.push(sub.records);
    }
    const polls = await Promise.all(range(0, 20).map(() => hub.read('c', base, 1000)));
    const waits = await Promise.all(range(0, 20).map(() => hub.waitAfter('c', base + 500, 1000, 1000)));
    expect(store.reads - reads).toBe(0);
    // One array per page, so what a surface derives from a page can be cached per array.
    expect(polls[1]!.records).toBe(polls[0]!.records);
    for (const records of later) {
      expect(offsetsOf(records)).toEqual(range(base + 1, 1000));
      for (const [k, record] of records.entries()) expect(record).toBe(first.records[k]);
    }
    for (const poll of polls)
      for (const [k, record] of poll.records.entries()) expect(record).toBe(first.records[k]);
    for (const wait of waits) {
      expect(offsetsOf(wait.records)).toEqual(range(base + 501, 500));
      expect(wait.records[0]).toBe(first.records[500]);
    }
    // A cursor inside the held range is known without a store round trip.
    expect((await hub.cursorStatus('c', base + 10)).status).toBe('ok');
    first.sub.close();
    await hub.close();
  });

  it('a poll storm on a cold gateway costs a store read or two, not one per poll', async () => {
    const { store, hub, base } = await cold(1000);
    const reads = store.reads;
    const first = await hub.read('c', base, 1000); // starts the channel; read before it knows the log
    const second = await hub.read('c', base, 1000); // kept by the channel once it is ready
    const rest = await Promise.all(range(0, 100).map(() => hub.read('c', base, 1000)));
    expect(store.reads - reads).toBeLessThanOrEqual(2);
    expect(offsetsOf(first.records)).toEqual(range(base + 1, 1000));
    for (const page of rest) {
      expect(page.records).toHaveLength(1000);
      expect(page.records[999]).toBe(second.records[999]);
    }
    await hub.close();
  });

  it('a memory run that does not cover a page sends the reader to the store for all of it', async () => {
    const { store, hub, base } = await cold(300, { recentRecords: 1000 });
    await hub.read('c', base, 1); // start the channel
    await hub.read('c', base + 100, 50); // held: base+101..150, apart from the tail
    const before = store.reads;
    expect(offsetsOf((await hub.read('c', base + 110, 20)).records)).toEqual(range(base + 111, 20));
    expect(store.reads - before).toBe(0);
    // base+141..190 is only partly held: the answer is the store's, whole.
    expect(offsetsOf((await hub.read('c', base + 140, 50)).records)).toEqual(range(base + 141, 50));
    expect(store.reads - before).toBe(1);
    await hub.close();
  });

  it('memory holds at most recentRecords, the newest kept', async () => {
    const { store, hub, base } = await cold(1000, { recentRecords: 300 });
    const sub = collect(hub, 'c', { after: base });
    await sub.until(base + 1000);
    const before = store.reads;
    expect((await hub.read('c', base + 800, 100)).records).toHaveLength(100);
    expect(store.reads - before).toBe(0);
    expect((await hub.read('c', base + 100, 100)).records).toHaveLength(100);
    expect(store.reads - before).toBe(1);
    sub.sub.close();
    await hub.close();
  });

  it('a new epoch clears memory: an old cursor then gets what the store holds, never old records', async () => {
    const store = new WrappedStore(new MemoryStore(), () => new MemoryStore());
    const base = (await store.position('c')).head;
    await store.append('c', frames(0, 200));
    const hub = new Hub(store, { pageSize: 100, dissolveMs: 60_000, tailWaitMs: 20 });
    const keep = collect(hub, 'c', { after: base });
    await keep.until(base + 200);
    store.loseLog(); // the new store's offsets start above (a later time floor)
    await store.append('c', [RESET, ...frames(0, 3)]);
    const fresh = (await store.read('c', 0, 10)).records;
    await keep.until(fresh[3]!.offset); // the channel has followed into the new epoch
    const page = await hub.read('c', base + 50, 100);
    expect(offsetsOf(page.records)).toEqual(offsetsOf(fresh));
    keep.sub.close();
    await hub.close();
  });

  it('a store read that started before the channel entered a new epoch is not kept', async () => {
    let hold = gate();
    let holding = false;
    class Held extends MemoryStore {
      override async read(...args: Parameters<MemoryStore['read']>): Promise<ReadResult> {
        const result = await super.read(...args);
        if (holding) await hold.promise;
        return result;
      }
    }
    const store = new WrappedStore(new Held(), () => new MemoryStore());
    const base = (await store.position('c')).head;
    await store.append('c', frames(0, 200));
    const hub = new Hub(store, { pageSize: 100, dissolveMs: 60_000, tailWaitMs: 20 });
    const keep = collect(hub, 'c', { after: base + 200 });
    await hub.read('c', base + 150, 1); // the channel is ready
    holding = true;
    const stale = hub.read('c', base, 100); // read from the old log, answered later
    store.loseLog();
    await store.append('c', [RESET, ...frames(0, 3)]);
    const fresh = (await store.read('c', 0, 10)).records;
    await keep.until(fresh[3]!.offset);
    hold.open();
    expect(offsetsOf((await stale).records)).toEqual(range(base + 1, 100));
    hold = gate();
    const before = store.reads;
    const again = await hub.read('c', base, 100);
    expect(store.reads - before).toBe(1);
    expect(offsetsOf(again.records)).toEqual(offsetsOf(fresh));
    keep.sub.close();
    await hub.close();
  });

  it('retention trimming under a reader still ends it as slow though memory holds the range', async () => {
    const store = new WrappedStore(new MemoryStore({ maxRecords: 100, maxAgeMs: 0 }));
    const base = (await store.position('c')).head;
    await store.append('c', frames(0, 100));
    const hub = new Hub(store, { pageSize: 10, dissolveMs: 60_000, recentRecords: 1000 });
    const first = collect(hub, 'c', { after: base });
    await first.until(base + 100); // memory holds base+1..100
    const held = gate();
    const slow = collect(hub, 'c', { after: base, onBatch: () => held.promise });
    await slow.until(base + 10);
    // In two appends, so the caught-up reader's tail never meets a hole: the store keeps base+151..250.
    await store.append('c', frames(100, 75));
    await first.until(base + 175);
    await store.append('c', frames(175, 75));
    await first.until(base + 250); // the tail loop has seen the trimmed position
    held.open();
    expect(await slow.ended).toBe('slow');
    expect(offsetsOf(slow.records)).toEqual(range(base + 1, 10));
    // A plain read there answers as the store does: from the first retained record (the poll's gap).
    expect(offsetsOf((await hub.read('c', base + 10, 5)).records)).toEqual(range(base + 151, 5));
    first.sub.close();
    await hub.close();
  });

  it('a storm of cursor checks on a cold hub shares one position read; a joined stale answer is not "ahead"', async () => {
    let hold = gate();
    let positions = 0;
    class Held extends MemoryStore {
      override async position(capsule: string): Promise<LogPosition> {
        positions++;
        const position = await super.position(capsule);
        await hold.promise;
        return position;
      }
      // The tail loop sees nothing until the end: the channel's memory cannot answer for base+15.
      override async waitAfter(...args: Parameters<MemoryStore['waitAfter']>) {
        await tail.promise;
        return super.waitAfter(...args);
      }
    }
    const tail = gate();
    const store = new Held();
    hold.open();
    const base = (await store.position('c')).head;
    await store.append('c', frames(0, 10));
    const hub = new Hub(store, { dissolveMs: 60_000 });
    await hub.read('c', base + 10, 1); // the channel is ready (its first position read is done)
    hold = gate();
    positions = 0;
    const checks = range(0, 100).map(() => hub.cursorStatus('c', base)); // an old cursor, not in memory
    // The head moves while the position read is held, past what the channel's tail has seen.
    await store.append('c', frames(10, 5));
    const late = hub.cursorStatus('c', base + 15); // joins the held read, whose head is base+10
    hold.open();
    for (const check of await Promise.all(checks)) expect(check.status).toBe('ok');
    const answer = await late;
    expect(answer.status).toBe('ok');
    expect(answer.position.head).toBe(base + 15);
    expect(positions).toBe(2); // the shared one, and the joined caller's fresh one
    tail.open();
    await hub.close();
  });
});
