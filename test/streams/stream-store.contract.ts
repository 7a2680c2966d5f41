/**
 * The StreamStore contract, one suite run against every store (memory-stream-store.test.ts,
 * redis-stream-store.test.ts): positions, refusals that change nothing, producers and Stream-Seq,
 * close, epochs of a recreated stream, expiry, the count bound, and waiting.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { AppendInput, StreamConfig, StreamStore } from '../../src/streams/types.js';

export type StreamStoreFactory = (
  maxStreams?: number,
  maxStreamsPerOwner?: number,
) => StreamStore | Promise<StreamStore>;

const text: StreamConfig = { contentType: 'text/plain', ttlSeconds: null, expiresAt: null, closed: false };
const b = (s: string): Buffer => Buffer.from(s);
const append = (entries: string[], more: Partial<AppendInput> = {}): AppendInput => ({
  contentType: 'text/plain',
  entries: entries.map(b),
  streamSeq: null,
  producer: null,
  close: false,
  ...more,
});
const contents = async (store: StreamStore, path: string): Promise<string[]> =>
  ((await store.read(path, 0, 1000, 1 << 20))?.entries ?? []).map((e) => e.toString());

export const runStreamStoreContract = (name: string, factory: StreamStoreFactory, skip = false): void => {
  describe.skipIf(skip)(`StreamStore contract (${name})`, () => {
    const stores: StreamStore[] = [];
    const make = async (maxStreams?: number): Promise<StreamStore> => {
      const s = await factory(maxStreams);
      stores.push(s);
      return s;
    };
    const path = (): string => `contract/${randomUUID()}`;
    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });

    it('appends messages at increasing positions and reads them after any position', async () => {
      const store = await make();
      const p = path();
      expect((await store.create(p, text, [b('a')])).kind).toBe('created');
      const r = await store.append(p, append(['b', 'c']));
      expect(r.kind === 'appended' && r.meta.tail).toBe(3);
      expect(await contents(store, p)).toEqual(['a', 'b', 'c']);
      expect((await store.read(p, 2, 10, 1 << 20))!.entries.map(String)).toEqual(['c']);
      expect((await store.read(p, 1, 1, 1 << 20))!.entries.map(String)).toEqual(['b']);
    });

    it('pages a long stream of mixed sizes: every message once, in order, each page in its bounds', async () => {
      const store = await make();
      const p = path();
      // Small messages, then large ones: a page sized by the largest still holds the byte bound.
      const small = Array.from({ length: 150 }, (_, i) => `s${i}`);
      const large = Array.from({ length: 120 }, (_, i) => `L${i}`.padEnd(700, '.'));
      expect((await store.create(p, text, small.slice(0, 100).map(b))).kind).toBe('created');
      expect((await store.append(p, append(small.slice(100)))).kind).toBe('appended');
      for (let i = 0; i < large.length; i += 40)
        expect((await store.append(p, append(large.slice(i, i + 40)))).kind).toBe('appended');
      for (const [maxEntries, maxBytes] of [
        [1000, 1 << 20],
        [70, 1 << 20],
        [1000, 5000],
        [1000, 500],
      ] as const) {
        const seen: string[] = [];
        let after = 0;
        for (let pages = 0; after < 270 && pages < 1000; pages++) {
          const page = (await store.read(p, after, maxEntries, maxBytes))!;
          expect(page.meta.tail).toBe(270);
          expect(page.entries.length).toBeGreaterThan(0);
          expect(page.entries.length).toBeLessThanOrEqual(maxEntries);
          const bytes = page.entries.reduce((n, e) => n + e.length, 0);
          if (page.entries.length > 1) expect(bytes).toBeLessThanOrEqual(maxBytes);
          seen.push(...page.entries.map(String));
          after += page.entries.length;
        }
        expect(seen).toEqual([...small, ...large]);
      }
      // From the tail: nothing, and the meta.
      const end = (await store.read(p, 270, 1000, 1 << 20))!;
      expect([end.entries, end.meta.tail]).toEqual([[], 270]);
    });

    it('refuses without writing: wrong type, Stream-Seq regression, producer gap, closed stream', async () => {
      const store = await make();
      const p = path();
      await store.create(p, text, []);
      expect((await store.append(p, append(['1'], { streamSeq: 'b' }))).kind).toBe('appended');
      expect((await store.append(p, append(['x'], { contentType: 'application/json' }))).kind).toBe(
        'content_type_mismatch',
      );
      expect((await store.append(p, append(['x'], { streamSeq: 'a' }))).kind).toBe('stream_seq_conflict');
      expect((await store.append(p, append(['x'], { producer: { id: 'p', epoch: 0, seq: 2 } }))).kind).toBe(
        'producer_seq_gap',
      );
      // The refused Stream-Seq and producer claims left no state: the same values are accepted now.
      expect(
        (await store.append(p, append(['2'], { streamSeq: 'c', producer: { id: 'p', epoch: 0, seq: 0 } })))
          .kind,
      ).toBe('appended');
      expect((await store.append(p, append(['3'], { close: true }))).kind).toBe('appended');
      expect((await store.append(p, append(['x']))).kind).toBe('closed');
      expect(await contents(store, p)).toEqual(['1', '2', '3']);
    });

    it('validates producers as §5.2.1 says and answers a retry as a duplicate', async () => {
      const store = await make();
      const p = path();
      await store.create(p, text, []);
      const claim = (epoch: number, seq: number) =>
        append([`${epoch}:${seq}`], { producer: { id: 'w', epoch, seq } });
      expect(await store.append(p, claim(0, 0))).toMatchObject({
        kind: 'appended',
        producer: { epoch: 0, seq: 0 },
      });
      expect(await store.append(p, claim(0, 1))).toMatchObject({
        kind: 'appended',
        producer: { epoch: 0, seq: 1 },
      });
      expect(await store.append(p, claim(0, 0))).toMatchObject({
        kind: 'duplicate',
        producer: { epoch: 0, seq: 1 },
      });
      expect(await store.append(p, claim(0, 3))).toMatchObject({
        kind: 'producer_seq_gap',
        expected: 2,
        received: 3,
      });
      expect(await store.append(p, claim(1, 1))).toMatchObject({ kind: 'producer_epoch_seq_not_zero' });
      expect(await store.append(p, claim(1, 0))).toMatchObject({
        kind: 'appended',
        producer: { epoch: 1, seq: 0 },
      });
      expect(await store.append(p, claim(0, 2))).toMatchObject({
        kind: 'stale_producer_epoch',
        currentEpoch: 1,
      });
      expect(await contents(store, p)).toEqual(['0:0', '0:1', '1:0']);
    });

    it('gives a stream created again after delete a greater epoch', async () => {
      const store = await make();
      const p = path();
      const first = await store.create(p, text, [b('old')]);
      expect(await store.delete(p)).toBe('deleted');
      expect(await store.delete(p)).toBe('not_found');
      const second = await store.create(p, text, []);
      expect(
        second.kind === 'created' && first.kind === 'created' && second.meta.epoch > first.meta.epoch,
      ).toBe(true);
      expect(await contents(store, p)).toEqual([]);
    });

    it('compares configurations on create, expires streams and bounds their count', async () => {
      const store = await make(2);
      const p = path();
      expect((await store.create(p, text, [])).kind).toBe('created');
      expect((await store.create(p, text, [])).kind).toBe('exists');
      expect((await store.create(p, { ...text, ttlSeconds: 5 }, [])).kind).toBe('conflict');
      const past = new Date(Date.now() - 1000).toISOString();
      const expired = path();
      await store.create(expired, { ...text, expiresAt: past }, []);
      expect(await store.head(expired)).toBeNull();
      expect((await store.create(path(), text, [])).kind).toBe('created');
      expect((await store.create(path(), text, [])).kind).toBe('too_many_streams');
    });

    it('wakes a waiter on append and on close, and ends one at its timeout or abort', async () => {
      const store = await make();
      const p = path();
      await store.create(p, text, []);
      const never = new AbortController().signal;
      const woken = store.waitAfter(p, 0, 20_000, never);
      await store.append(p, append(['x']));
      expect(await woken).toEqual({ ready: true });
      const closing = store.waitAfter(p, 1, 20_000, never);
      await store.append(p, append([], { contentType: null, close: true }));
      expect(await closing).toEqual({ ready: true });
      const q = path();
      await store.create(q, text, []);
      expect(await store.waitAfter(q, 0, 50, never)).toEqual({ ready: false });
      const ac = new AbortController();
      const aborted = store.waitAfter(q, 0, 20_000, ac.signal);
      ac.abort();
      expect(await aborted).toEqual({ ready: false });
    });
  });
};
