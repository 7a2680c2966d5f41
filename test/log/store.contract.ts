/**
 * The LogStore contract, one suite run against every store (memory-store.test.ts, redis-store.test.ts):
 * offsets, concurrency, paging, retention, waiting, idempotent batches, isolation.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FrameEntry, LogEntry, LogRecord } from '../../src/log/record.js';
import type { LogStore, RetentionPolicy } from '../../src/log/store.js';
import { uniqueCapsule } from '../support/redis.js';

export type StoreFactory = (retention?: RetentionPolicy) => LogStore | Promise<LogStore>;

export const frame = (label: string, receivedAt = Date.now()): FrameEntry => ({
  kind: 'frame',
  event: 'text',
  upstreamId: label,
  data: JSON.stringify({ label }),
  receivedAt,
});

const labels = (records: readonly LogRecord[]): (string | null)[] =>
  records.map((r) => (r.kind === 'frame' ? r.upstreamId : null));

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Page through the whole log with reads of `limit` (bounded: at most 10_000 pages). */
export const readAll = async (store: LogStore, capsule: string, limit = 500): Promise<LogRecord[]> => {
  const out: LogRecord[] = [];
  let after = 0;
  for (let page = 0; page < 10_000; page++) {
    const { records } = await store.read(capsule, after, limit);
    if (records.length === 0) return out;
    out.push(...records);
    after = records[records.length - 1]!.offset;
  }
  throw new Error('readAll: too many pages');
};

export const runStoreContract = (name: string, factory: StoreFactory, skip = false): void => {
  describe.skipIf(skip)(`LogStore contract: ${name}`, () => {
    const opened: LogStore[] = [];
    const open = async (retention?: RetentionPolicy): Promise<LogStore> => {
      const store = await factory(retention);
      opened.push(store);
      return store;
    };
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((s) => s.close()));
    });

    it('mints offsets from 1, strictly increasing, and reads entries back unchanged', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const first = await store.append(cap, [frame('a'), frame('b'), frame('c')]);
      const second = await store.append(cap, [frame('d'), frame('e')]);
      expect(first.offsets).toEqual([1, 2, 3]);
      expect(second.offsets).toEqual([4, 5]);
      expect(second.epoch).toBe(first.epoch);
      const { records, position } = await store.read(cap, 0, 100);
      expect(records.map((r) => r.offset)).toEqual([1, 2, 3, 4, 5]);
      expect(labels(records)).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(position).toEqual({ head: 5, first: 1, epoch: first.epoch });
    });

    it('stores every kind of entry byte for byte, invalid JSON data included', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const entries: LogEntry[] = [
        { kind: 'frame', event: 'error', upstreamId: '7', data: '{"msg":"bad "x"}', receivedAt: 1 },
        { kind: 'frame', event: 'connection-ack', upstreamId: null, data: 'é\u2028ü', receivedAt: 2 },
        {
          kind: 'fact',
          fact: 'frames-possibly-missing',
          reason: 'gap',
          firstAvailableId: '9',
          receivedAt: 3,
        },
        {
          kind: 'submission',
          protocol: 'flue',
          owner: null,
          contextId: 'ctx',
          messageId: 'm1',
          text: 'hi\nthere',
          meta: { submissionId: 's1', nested: [1, { a: true }] },
          receivedAt: 4,
        },
      ];
      await store.append(cap, entries);
      const { records } = await store.read(cap, 0, 10);
      expect(records).toEqual(entries.map((e, i) => ({ ...e, offset: i + 1 })));
    });

    it('an empty log has head 0, first 1 and a stable epoch below 10^16', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const before = await store.position(cap);
      expect(before.head).toBe(0);
      expect(before.first).toBe(1);
      expect(Number.isInteger(before.epoch)).toBe(true);
      expect(before.epoch).toBeGreaterThan(0);
      expect(before.epoch).toBeLessThan(1e16);
      const { epoch } = await store.append(cap, [frame('a')]);
      expect(epoch).toBe(before.epoch);
      expect(await store.position(cap)).toEqual({ head: 1, first: 1, epoch });
    });

    it('gives no duplicate and no hole under 20 concurrent appenders × 200 appends', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const perAppender = await Promise.all(
        range(0, 19).map(async (a) => {
          const got: number[] = [];
          for (let i = 0; i < 200; i++) {
            // Mixed batch sizes: single entries and pairs interleave between appenders.
            const entries = i % 2 === 0 ? [frame(`${a}:${i}`)] : [frame(`${a}:${i}`), frame(`${a}:${i}b`)];
            got.push(...(await store.append(cap, entries)).offsets);
          }
          return got;
        }),
      );
      const all = perAppender.flat().sort((x, y) => x - y);
      expect(all).toEqual(range(1, 6000));
      for (const got of perAppender) {
        expect(got).toEqual([...got].sort((x, y) => x - y)); // each appender's order preserved
      }
      const records = await readAll(store, cap, 700);
      expect(records.map((r) => r.offset)).toEqual(range(1, 6000));
      expect(new Set(labels(records)).size).toBe(6000);
    });

    it('pages through a range with read(after, limit)', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      await store.append(
        cap,
        range(1, 25).map((i) => frame(String(i))),
      );
      const p1 = await store.read(cap, 0, 10);
      const p2 = await store.read(cap, 10, 10);
      const p3 = await store.read(cap, 20, 10);
      const p4 = await store.read(cap, 25, 10);
      expect(p1.records.map((r) => r.offset)).toEqual(range(1, 10));
      expect(p2.records.map((r) => r.offset)).toEqual(range(11, 20));
      expect(p3.records.map((r) => r.offset)).toEqual(range(21, 25));
      expect(p4.records).toEqual([]);
      expect(p4.position).toMatchObject({ head: 25, first: 1 });
      expect((await store.read(cap, 7, 3)).records.map((r) => r.offset)).toEqual([8, 9, 10]);
      expect((await store.read(cap, 99, 10)).records).toEqual([]);
      expect((await store.read(cap, 3, 0)).records).toEqual([]);
    });

    it('readLast returns the last n records, oldest first', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      expect(await store.readLast(cap, 5)).toEqual([]);
      await store.append(
        cap,
        range(1, 25).map((i) => frame(String(i))),
      );
      expect((await store.readLast(cap, 3)).map((r) => r.offset)).toEqual([23, 24, 25]);
      expect(labels(await store.readLast(cap, 3))).toEqual(['23', '24', '25']);
      expect((await store.readLast(cap, 100)).map((r) => r.offset)).toEqual(range(1, 25));
      expect(await store.readLast(cap, 0)).toEqual([]);
    });

    it('keeps at most maxRecords records (count retention)', async () => {
      const store = await open({ maxRecords: 5, maxAgeMs: 0 });
      const cap = uniqueCapsule();
      for (let i = 1; i <= 12; i++) await store.append(cap, [frame(String(i))]);
      expect((await store.position(cap)).head).toBe(12);
      expect((await store.position(cap)).first).toBe(8);
      expect((await store.read(cap, 0, 100)).records.map((r) => r.offset)).toEqual(range(8, 12));
      expect((await store.read(cap, 2, 2)).records.map((r) => r.offset)).toEqual([8, 9]);
      expect((await store.readLast(cap, 10)).map((r) => r.offset)).toEqual(range(8, 12));
      await store.append(
        cap,
        range(13, 20).map((i) => frame(String(i))),
      );
      expect((await store.position(cap)).first).toBe(16);
    });

    it('drops records older than maxAgeMs on trim (age retention)', async () => {
      const store = await open({ maxRecords: 0, maxAgeMs: 60_000 });
      const cap = uniqueCapsule();
      const old = Date.now() - 120_000;
      await store.append(
        cap,
        range(1, 5).map((i) => frame(String(i), old)),
      );
      await store.append(
        cap,
        range(6, 8).map((i) => frame(String(i))),
      );
      await store.trim(cap);
      expect(await store.position(cap)).toMatchObject({ head: 8, first: 6 });
      expect((await store.read(cap, 0, 100)).records.map((r) => r.offset)).toEqual([6, 7, 8]);
      const all = await open({ maxRecords: 0, maxAgeMs: 60_000 });
      const cap2 = uniqueCapsule();
      await all.append(
        cap2,
        range(1, 3).map((i) => frame(String(i), old)),
      );
      await all.trim(cap2);
      expect(await all.position(cap2)).toMatchObject({ head: 3, first: 4 });
      expect((await all.append(cap2, [frame('4')])).offsets).toEqual([4]);
    });

    it('waitAfter answers at once when records exist after the cursor', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      await store.append(cap, [frame('a'), frame('b'), frame('c')]);
      const got = await store.waitAfter(cap, 1, 10, 60_000);
      expect(got.records.map((r) => r.offset)).toEqual([2, 3]);
      expect(got.position.head).toBe(3);
      expect((await store.waitAfter(cap, 0, 2, 60_000)).records.map((r) => r.offset)).toEqual([1, 2]);
    });

    it('waitAfter wakes on the next append', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      await store.append(cap, [frame('a')]);
      // 60 s wait > the test timeout: only the append can make this pass.
      const waiting = store.waitAfter(cap, 1, 10, 60_000);
      const { offsets } = await store.append(cap, [frame('b'), frame('c')]);
      const got = await waiting;
      expect(offsets).toEqual([2, 3]);
      // Both came in one atomic append, so the woken read sees both.
      expect(labels(got.records)).toEqual(['b', 'c']);
      expect(got.records.map((r) => r.offset)).toEqual([2, 3]);
    });

    it('waitAfter wakes a waiter on an empty log', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const waiting = store.waitAfter(cap, 0, 10, 60_000);
      await store.append(cap, [frame('first')]);
      expect(labels((await waiting).records)).toEqual(['first']);
    });

    it('waitAfter resolves empty after its timeout', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      await store.append(cap, [frame('a')]);
      const got = await store.waitAfter(cap, 1, 10, 150);
      expect(got.records).toEqual([]);
      expect(got.position.head).toBe(1);
    });

    it('waitAfter resolves empty when its signal aborts, and at once when already aborted', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      await store.append(cap, [frame('a')]);
      const ac = new AbortController();
      const waiting = store.waitAfter(cap, 1, 10, 60_000, ac.signal);
      setTimeout(() => ac.abort(), 50);
      expect((await waiting).records).toEqual([]);
      expect((await store.waitAfter(cap, 1, 10, 60_000, ac.signal)).records).toEqual([]);
      // Aborted while the store is still reading or connecting (before any wait is parked).
      const early = new AbortController();
      const racing = store.waitAfter(cap, 1, 10, 60_000, early.signal);
      early.abort();
      expect((await racing).records).toEqual([]);
      // The store still works after an abort, and a later waiter still wakes.
      const again = store.waitAfter(cap, 1, 10, 60_000);
      await store.append(cap, [frame('b')]);
      expect(labels((await again).records)).toEqual(['b']);
    });

    it('applies a BatchId at most once and reports where it landed', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const first = await store.append(cap, [frame('a'), frame('b')], { writerId: 'w1', seq: 1 });
      expect(first.offsets).toEqual([1, 2]);
      const retry = await store.append(cap, [frame('a'), frame('b')], { writerId: 'w1', seq: 1 });
      expect(retry).toEqual({ offsets: [], epoch: first.epoch, appliedOffsets: [1, 2] });
      expect((await store.append(cap, [frame('c')], { writerId: 'w1', seq: 2 })).offsets).toEqual([3]);
      expect((await store.append(cap, [frame('x')], { writerId: 'w2', seq: 1 })).offsets).toEqual([4]);
      expect((await store.append(cap, [frame('old')], { writerId: 'w1', seq: 1 })).offsets).toEqual([]);
      expect(labels((await store.read(cap, 0, 10)).records)).toEqual(['a', 'b', 'c', 'x']);
      // Batch ids are per capsule: the same id on another capsule is a new batch.
      const other = uniqueCapsule();
      expect((await store.append(other, [frame('a')], { writerId: 'w1', seq: 1 })).offsets).toEqual([1]);
    });

    it('keeps capsules isolated', async () => {
      const store = await open();
      const a = uniqueCapsule('a');
      const b = uniqueCapsule('b');
      await store.append(a, [frame('a1'), frame('a2'), frame('a3')]);
      expect((await store.append(b, [frame('b1'), frame('b2')])).offsets).toEqual([1, 2]);
      expect(labels((await store.read(a, 0, 10)).records)).toEqual(['a1', 'a2', 'a3']);
      expect(labels((await store.read(b, 0, 10)).records)).toEqual(['b1', 'b2']);
      expect((await store.position(b)).head).toBe(2);
    });

    it('answers ping', async () => {
      const store = await open();
      expect(await store.ping()).toBe(true);
    });
  });
};
