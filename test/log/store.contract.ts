/**
 * The LogStore contract, one suite run against every store (memory-store.test.ts, redis-store.test.ts):
 * offsets (from the time floor, never from 1), concurrency, paging, retention, waiting, idempotent
 * batches, isolation, and the epoch fence when a writer's floor is above the store.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FrameEntry, LogEntry, LogRecord } from '../../src/log/record.js';
import { timeFloor, type LogStore, type RetentionPolicy } from '../../src/log/store.js';
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

/** Offsets relative to a log's first one: `rel(b, 1, 2)` = the first and second offsets after b. */
export const rel = (base: number, ...positions: number[]): number[] => positions.map((p) => base + p);

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

    it('mints offsets from the time floor, strictly increasing, and reads entries back unchanged', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const floorBefore = timeFloor();
      const first = await store.append(cap, [frame('a'), frame('b'), frame('c')]);
      const second = await store.append(cap, [frame('d'), frame('e')]);
      const b = first.offsets[0]! - 1;
      // Above the µs since 2026-01-01 at the log's start: no offset of an earlier epoch is reused.
      expect(b).toBeGreaterThanOrEqual(floorBefore);
      expect(first.offsets).toEqual(rel(b, 1, 2, 3));
      expect(second.offsets).toEqual(rel(b, 4, 5));
      expect(second.epoch).toBe(first.epoch);
      const { records, position } = await store.read(cap, 0, 100);
      expect(records.map((r) => r.offset)).toEqual(rel(b, 1, 2, 3, 4, 5));
      expect(labels(records)).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(position).toEqual({ head: b + 5, first: b + 1, epoch: first.epoch });
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
      const { offsets } = await store.append(cap, entries);
      const { records } = await store.read(cap, 0, 10);
      expect(records).toEqual(entries.map((e, i) => ({ ...e, offset: offsets[0]! + i })));
    });

    it('an empty log has head at its time floor, first head + 1 and a stable epoch below 10^16', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const floorBefore = timeFloor();
      const before = await store.position(cap);
      expect(before.head).toBeGreaterThanOrEqual(floorBefore);
      expect(before.first).toBe(before.head + 1);
      expect(Number.isInteger(before.epoch)).toBe(true);
      expect(before.epoch).toBeGreaterThan(0);
      expect(before.epoch).toBeLessThan(1e16);
      const { epoch, offsets } = await store.append(cap, [frame('a')]);
      expect(epoch).toBe(before.epoch);
      expect(offsets).toEqual([before.head + 1]);
      expect(await store.position(cap)).toEqual({ head: before.head + 1, first: before.head + 1, epoch });
    });

    it('gives no duplicate and no hole under 20 concurrent appenders × 200 appends', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const b = (await store.position(cap)).head;
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
      expect(all).toEqual(range(b + 1, b + 6000));
      for (const got of perAppender) {
        expect(got).toEqual([...got].sort((x, y) => x - y)); // each appender's order preserved
      }
      const records = await readAll(store, cap, 700);
      expect(records.map((r) => r.offset)).toEqual(range(b + 1, b + 6000));
      expect(new Set(labels(records)).size).toBe(6000);
    });

    it('pages through a range with read(after, limit)', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const b = (await store.position(cap)).head;
      await store.append(
        cap,
        range(1, 25).map((i) => frame(String(i))),
      );
      const p1 = await store.read(cap, 0, 10);
      const p2 = await store.read(cap, b + 10, 10);
      const p3 = await store.read(cap, b + 20, 10);
      const p4 = await store.read(cap, b + 25, 10);
      expect(p1.records.map((r) => r.offset)).toEqual(range(b + 1, b + 10));
      expect(p2.records.map((r) => r.offset)).toEqual(range(b + 11, b + 20));
      expect(p3.records.map((r) => r.offset)).toEqual(range(b + 21, b + 25));
      expect(p4.records).toEqual([]);
      expect(p4.position).toMatchObject({ head: b + 25, first: b + 1 });
      expect((await store.read(cap, b + 7, 3)).records.map((r) => r.offset)).toEqual(rel(b, 8, 9, 10));
      expect((await store.read(cap, b + 99, 10)).records).toEqual([]);
      expect((await store.read(cap, b + 3, 0)).records).toEqual([]);
    });

    it('readLast returns the last n records, oldest first', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      expect(await store.readLast(cap, 5)).toEqual([]);
      const { offsets } = await store.append(
        cap,
        range(1, 25).map((i) => frame(String(i))),
      );
      const b = offsets[0]! - 1;
      expect((await store.readLast(cap, 3)).map((r) => r.offset)).toEqual(rel(b, 23, 24, 25));
      expect(labels(await store.readLast(cap, 3))).toEqual(['23', '24', '25']);
      expect((await store.readLast(cap, 100)).map((r) => r.offset)).toEqual(range(b + 1, b + 25));
      expect(await store.readLast(cap, 0)).toEqual([]);
    });

    it('keeps at most maxRecords records (count retention)', async () => {
      const store = await open({ maxRecords: 5, maxAgeMs: 0 });
      const cap = uniqueCapsule();
      const b = (await store.position(cap)).head;
      for (let i = 1; i <= 12; i++) await store.append(cap, [frame(String(i))]);
      expect((await store.position(cap)).head).toBe(b + 12);
      expect((await store.position(cap)).first).toBe(b + 8);
      expect((await store.read(cap, 0, 100)).records.map((r) => r.offset)).toEqual(range(b + 8, b + 12));
      expect((await store.read(cap, b + 2, 2)).records.map((r) => r.offset)).toEqual(rel(b, 8, 9));
      expect((await store.readLast(cap, 10)).map((r) => r.offset)).toEqual(range(b + 8, b + 12));
      await store.append(
        cap,
        range(13, 20).map((i) => frame(String(i))),
      );
      expect((await store.position(cap)).first).toBe(b + 16);
    });

    it('keeps about maxBytes per capsule: a flood of large records pushes out only down to it', async () => {
      const maxBytes = 64 * 1024;
      const store = await open({ maxRecords: 0, maxAgeMs: 0, maxBytes });
      const cap = uniqueCapsule();
      const b = (await store.position(cap)).head;
      const big = (i: number) => ({
        ...frame(String(i)),
        data: JSON.stringify({ label: i, pad: 'x'.repeat(4096) }),
      });
      for (let i = 1; i <= 100; i++) await store.append(cap, [big(i)]);
      const { head, first } = await store.position(cap);
      expect(head).toBe(b + 100);
      const kept = head - first + 1;
      // ~400 KiB written into a 64 KiB bound: most is gone, the newest stays, what is kept fits
      // (Redis's estimate includes its own overhead, so the bound is approximate there).
      expect(kept).toBeGreaterThanOrEqual(1);
      expect(kept).toBeLessThanOrEqual(Math.ceil(maxBytes / 4096) + 1);
      expect(first).toBeGreaterThan(b + 1);
      const records = await store.read(cap, 0, 1000);
      expect(records.records.at(-1)?.offset).toBe(b + 100);
      // A cursor from before the cut is older than retention: surfaces signal it as for any trim.
      expect(first - 1).toBeGreaterThan(b + 1);
    });

    it('drops records older than maxAgeMs on trim (age retention)', async () => {
      const store = await open({ maxRecords: 0, maxAgeMs: 60_000 });
      const cap = uniqueCapsule();
      const b = (await store.position(cap)).head;
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
      expect(await store.position(cap)).toMatchObject({ head: b + 8, first: b + 6 });
      expect((await store.read(cap, 0, 100)).records.map((r) => r.offset)).toEqual(rel(b, 6, 7, 8));
      const all = await open({ maxRecords: 0, maxAgeMs: 60_000 });
      const cap2 = uniqueCapsule();
      const b2 = (await all.position(cap2)).head;
      await all.append(
        cap2,
        range(1, 3).map((i) => frame(String(i), old)),
      );
      await all.trim(cap2);
      expect(await all.position(cap2)).toMatchObject({ head: b2 + 3, first: b2 + 4 });
      expect((await all.append(cap2, [frame('4')])).offsets).toEqual([b2 + 4]);
    });

    it('waitAfter answers at once when records exist after the cursor', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const b = (await store.append(cap, [frame('a'), frame('b'), frame('c')])).offsets[0]! - 1;
      const got = await store.waitAfter(cap, b + 1, 10, 60_000);
      expect(got.records.map((r) => r.offset)).toEqual(rel(b, 2, 3));
      expect(got.position.head).toBe(b + 3);
      expect((await store.waitAfter(cap, 0, 2, 60_000)).records.map((r) => r.offset)).toEqual(rel(b, 1, 2));
    });

    it('waitAfter wakes on the next append', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const b = (await store.append(cap, [frame('a')])).offsets[0]! - 1;
      // 60 s wait > the test timeout: only the append can make this pass.
      const waiting = store.waitAfter(cap, b + 1, 10, 60_000);
      const { offsets } = await store.append(cap, [frame('b'), frame('c')]);
      const got = await waiting;
      expect(offsets).toEqual(rel(b, 2, 3));
      // Both came in one atomic append, so the woken read sees both.
      expect(labels(got.records)).toEqual(['b', 'c']);
      expect(got.records.map((r) => r.offset)).toEqual(rel(b, 2, 3));
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
      const [at] = (await store.append(cap, [frame('a')])).offsets;
      const got = await store.waitAfter(cap, at!, 10, 150);
      expect(got.records).toEqual([]);
      expect(got.position.head).toBe(at);
    });

    it('waitAfter resolves empty when its signal aborts, and at once when already aborted', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const at = (await store.append(cap, [frame('a')])).offsets[0]!;
      const ac = new AbortController();
      const waiting = store.waitAfter(cap, at, 10, 60_000, ac.signal);
      setTimeout(() => ac.abort(), 50);
      expect((await waiting).records).toEqual([]);
      expect((await store.waitAfter(cap, at, 10, 60_000, ac.signal)).records).toEqual([]);
      // Aborted while the store is still reading or connecting (before any wait is parked).
      const early = new AbortController();
      const racing = store.waitAfter(cap, at, 10, 60_000, early.signal);
      early.abort();
      expect((await racing).records).toEqual([]);
      // The store still works after an abort, and a later waiter still wakes.
      const again = store.waitAfter(cap, at, 10, 60_000);
      await store.append(cap, [frame('b')]);
      expect(labels((await again).records)).toEqual(['b']);
    });

    it('applies a BatchId at most once and reports where it landed', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const w1 = (seq: number) => ({ batch: { writerId: 'w1', seq } });
      const first = await store.append(cap, [frame('a'), frame('b')], w1(1));
      const b = first.offsets[0]! - 1;
      expect(first.offsets).toEqual(rel(b, 1, 2));
      const retry = await store.append(cap, [frame('a'), frame('b')], w1(1));
      expect(retry).toEqual({ offsets: [], epoch: first.epoch, appliedOffsets: rel(b, 1, 2) });
      expect((await store.append(cap, [frame('c')], w1(2))).offsets).toEqual(rel(b, 3));
      const w2 = { batch: { writerId: 'w2', seq: 1 } };
      expect((await store.append(cap, [frame('x')], w2)).offsets).toEqual(rel(b, 4));
      expect((await store.append(cap, [frame('old')], w1(1))).offsets).toEqual([]);
      expect(labels((await store.read(cap, 0, 10)).records)).toEqual(['a', 'b', 'c', 'x']);
      // Batch ids are per capsule: the same id on another capsule is a new batch.
      const other = uniqueCapsule();
      expect((await store.append(other, [frame('a')], w1(1))).offsets).toHaveLength(1);
    });

    it('fences a writer floor above the store with a new epoch: the reset fact first and alone', async () => {
      const store = await open();
      const cap = uniqueCapsule();
      const before = await store.append(cap, [frame('a'), frame('b')]);
      // The writer saw offsets this store no longer holds (a rollback): its floor is above the head.
      const floor = before.offsets[1]! + 1000;
      const resetFact: LogEntry = {
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'store-reset',
        receivedAt: 42,
      };
      const opts = { floor, resetFact, batch: { writerId: 'w', seq: 1 } };
      const reset = await store.append(cap, [frame('c')], opts);
      expect(reset.reset).toBe(true);
      expect(reset.epoch).not.toBe(before.epoch);
      expect(reset.offsets).toHaveLength(1);
      expect(reset.offsets[0]).toBeGreaterThan(floor);
      // A retry of that batch (a lost reply) gets the same answer and appends nothing.
      expect(await store.append(cap, [frame('c')], opts)).toEqual(reset);
      const next = await store.append(cap, [frame('c')], {
        floor: reset.offsets[0]!,
        resetFact,
        batch: { writerId: 'w', seq: 2 },
      });
      expect(next).toEqual({ offsets: [reset.offsets[0]! + 1], epoch: reset.epoch });
      // The records that survived stay; a reader resuming from an old cursor meets the fact first.
      expect(labels((await store.read(cap, 0, 10)).records)).toEqual(['a', 'b', null, 'c']);
      const resumed = await store.read(cap, before.offsets[1]!, 10);
      expect(resumed.records[0]).toEqual({ ...resetFact, offset: reset.offsets[0] });
      expect(resumed.position).toEqual({
        head: reset.offsets[0]! + 1,
        first: before.offsets[0],
        epoch: reset.epoch,
      });
    });

    it('keeps capsules isolated', async () => {
      const store = await open();
      const a = uniqueCapsule('a');
      const b = uniqueCapsule('b');
      await store.append(a, [frame('a1'), frame('a2'), frame('a3')]);
      const { offsets } = await store.append(b, [frame('b1'), frame('b2')]);
      expect(offsets).toEqual(rel(offsets[0]! - 1, 1, 2));
      expect(labels((await store.read(a, 0, 10)).records)).toEqual(['a1', 'a2', 'a3']);
      expect(labels((await store.read(b, 0, 10)).records)).toEqual(['b1', 'b2']);
      expect((await store.position(b)).head).toBe(offsets[1]);
    });

    it('answers ping', async () => {
      const store = await open();
      expect(await store.ping()).toBe(true);
    });
  });
};
