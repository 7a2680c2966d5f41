/**
 * The StreamStore contract for forks and the sliding TTL, run against every store beside
 * stream-store.contract.ts: stitched reads through a chain of forks (paged across the boundaries),
 * the offsets a fork accepts, sub-offsets, soft delete and its cascade, and expiry with forks.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { MAX_FORK_DEPTH, resolveOffset, TOO_DEEP } from '../../src/streams/forks.js';
import type {
  AppendInput,
  ForkRequest,
  StreamConfig,
  StreamMeta,
  StreamStore,
} from '../../src/streams/types.js';
import type { StreamStoreFactory } from './stream-store.contract.js';

const text: StreamConfig = { contentType: 'text/plain', ttlSeconds: null, expiresAt: null, closed: false };
const json: StreamConfig = { ...text, contentType: 'application/json' };
const b = (s: string): Buffer => Buffer.from(s);
const append = (entries: string[], more: Partial<AppendInput> = {}): AppendInput => ({
  contentType: 'text/plain',
  entries: entries.map(b),
  streamSeq: null,
  producer: null,
  close: false,
  ...more,
});
const forkOf = (source: string, more: Partial<ForkRequest> = {}): ForkRequest => ({
  source,
  offset: null,
  subOffset: 0,
  inheritContentType: false,
  inheritExpiry: true,
  ...more,
});
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export const runForkContract = (name: string, factory: StreamStoreFactory, skip = false): void => {
  describe.skipIf(skip)(`StreamStore forks (${name})`, () => {
    const stores: StreamStore[] = [];
    const make = async (maxStreams?: number, maxStreamsPerOwner?: number): Promise<StreamStore> => {
      const s = await factory(maxStreams, maxStreamsPerOwner);
      stores.push(s);
      return s;
    };
    const path = (): string => `forks/${randomUUID()}`;
    afterEach(async () => {
      await Promise.all(stores.splice(0).map((s) => s.close()));
    });
    const contents = async (store: StreamStore, p: string, after = 0): Promise<string[]> =>
      ((await store.read(p, after, 1000, 1 << 20))?.entries ?? []).map(String);
    const created = async (
      store: StreamStore,
      ...args: Parameters<StreamStore['create']>
    ): Promise<StreamMeta> => {
      const r = await store.create(...args);
      if (r.kind !== 'created') throw new Error(`create answered ${r.kind}`);
      return r.meta;
    };

    it('stitches a chain of forks, page by page across each fork point', async () => {
      const store = await make();
      const [l0, l1, l2] = [path(), path(), path()];
      await created(store, l0, text, [b('a'), b('b')]);
      await created(store, l1, text, [b('c')], forkOf(l0));
      await store.append(l0, append(['not-in-l1']));
      await created(store, l2, text, [], forkOf(l1));
      await store.append(l2, append(['d', 'e']));
      expect(await contents(store, l2)).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(await contents(store, l1)).toEqual(['a', 'b', 'c']);
      // One message a page: every boundary is crossed by a fresh read.
      const paged: string[] = [];
      for (let after = 0; after < 5; after++)
        paged.push(...(await store.read(l2, after, 1, 1 << 20))!.entries.map(String));
      expect(paged).toEqual(['a', 'b', 'c', 'd', 'e']);
      // The byte bound holds across a fork point too (at least one message a read).
      expect((await store.read(l2, 1, 10, 1))!.entries.map(String)).toEqual(['b']);
      expect((await store.head(l2))!.tail).toBe(5);
    });

    it("gives a fork an epoch above its source's, and accepts the source's offsets up to the fork point", async () => {
      const store = await make();
      const [src, fork, grand] = [path(), path(), path()];
      const s = await created(store, src, text, [b('a'), b('b'), b('c')]);
      const f = await created(
        store,
        fork,
        text,
        [],
        forkOf(src, { offset: { epoch: s.epoch, position: 2 } }),
      );
      expect(f.epoch).toBeGreaterThan(s.epoch);
      expect(f.tail).toBe(2);
      expect(resolveOffset(f, s.epoch, 2)).toEqual({ position: 2 });
      expect(resolveOffset(f, s.epoch, 3)).toMatchObject({ code: 'bad_request' });
      expect(resolveOffset(f, f.epoch, 2)).toEqual({ position: 2 });
      // Position 0 names the empty prefix of any epoch.
      expect(resolveOffset(f, 0, 0)).toEqual({ position: 0 });
      await store.append(fork, append(['x']));
      const g = await created(
        store,
        grand,
        text,
        [],
        forkOf(fork, { offset: { epoch: f.epoch, position: 3 } }),
      );
      // The grandparent's offsets, capped at the nearer fork point.
      expect(resolveOffset(g, s.epoch, 2)).toEqual({ position: 2 });
      expect(resolveOffset(g, s.epoch, 3)).toMatchObject({ code: 'bad_request' });
      expect(resolveOffset(g, f.epoch, 3)).toEqual({ position: 3 });
      expect(await contents(store, grand)).toEqual(['a', 'b', 'x']);
      // Offsets the source does not have are refused at the fork.
      const beyond = await store.create(
        path(),
        text,
        [],
        forkOf(src, { offset: { epoch: s.epoch, position: 9 } }),
      );
      expect(beyond).toMatchObject({ kind: 'bad_fork', code: 'bad_request' });
      const before = await store.create(
        path(),
        text,
        [],
        forkOf(src, { offset: { epoch: s.epoch - 1, position: 1 } }),
      );
      expect(before).toMatchObject({ kind: 'bad_fork', code: 'offset_gone' });
    });

    it('bounds how deep forks of forks nest', async () => {
      const store = await make();
      let parent = path();
      await created(store, parent, text, [b('a')]);
      for (let depth = 1; depth <= MAX_FORK_DEPTH; depth++) {
        const next = path();
        await created(store, next, text, [], forkOf(parent));
        parent = next;
      }
      expect(await store.create(path(), text, [], forkOf(parent))).toEqual({
        kind: 'bad_fork',
        code: 'bad_request',
        message: TOO_DEEP,
      });
      expect(await contents(store, parent)).toEqual(['a']);
    });

    it('cuts a byte sub-offset into a copied prefix and moves a JSON one by messages; no producer state', async () => {
      const store = await make();
      const [src, bytes, j, jf] = [path(), path(), path(), path()];
      const s = await created(store, src, text, [b('one'), b('hello')]);
      const at1 = { epoch: s.epoch, position: 1 };
      await store.append(src, append(['p'], { producer: { id: 'p', epoch: 0, seq: 0 } }));
      const f = await created(store, bytes, text, [b('!')], forkOf(src, { offset: at1, subOffset: 3 }));
      expect(f.tail).toBe(3);
      expect(await contents(store, bytes)).toEqual(['one', 'hel', '!']);
      // The source's offset 1 still names the fork point (the copied prefix is the fork's own).
      expect(resolveOffset(f, s.epoch, 2)).toMatchObject({ code: 'bad_request' });
      const r = await store.append(bytes, append(['q'], { producer: { id: 'p', epoch: 0, seq: 0 } }));
      expect(r.kind).toBe('appended');
      expect(await store.create(path(), text, [], forkOf(src, { offset: at1, subOffset: 6 }))).toMatchObject({
        kind: 'bad_fork',
      });
      await created(store, j, json, [b('1'), b('2'), b('3')]);
      await created(store, jf, json, [], forkOf(j, { offset: { epoch: 0, position: 0 }, subOffset: 2 }));
      expect(await contents(store, jf)).toEqual(['1', '2']);
      expect(await store.create(path(), json, [], forkOf(j, { subOffset: 1 }))).toMatchObject({
        kind: 'bad_fork',
      });
    });

    it('soft-deletes a source with forks, and removes it with its last fork, up the chain', async () => {
      const store = await make();
      const [l0, l1, l2] = [path(), path(), path()];
      await created(store, l0, text, [b('a')]);
      await created(store, l1, text, [b('b')], forkOf(l0));
      await created(store, l2, text, [], forkOf(l1));
      expect(await store.delete(l0)).toBe('deleted');
      expect(await store.delete(l1)).toBe('deleted');
      expect((await store.head(l0))!.gone).toBe(true);
      expect(await store.delete(l0)).toBe('gone');
      expect((await store.append(l1, append(['x']))).kind).toBe('gone');
      expect((await store.read(l1, 0, 10, 1 << 20))!.entries).toEqual([]);
      expect((await store.create(l0, text, [])).kind).toBe('gone');
      expect((await store.create(path(), text, [], forkOf(l1))).kind).toBe('source_gone');
      expect(await contents(store, l2)).toEqual(['a', 'b']);
      expect(await store.delete(l2)).toBe('deleted');
      expect(await store.head(l1)).toBeNull();
      expect(await store.head(l0)).toBeNull();
      expect((await store.create(l0, text, [])).kind).toBe('created');
    });

    it('keeps a source that loses its forks; a refused fork takes no reference', async () => {
      const store = await make();
      const [src, fork] = [path(), path()];
      await created(store, src, text, [b('a')]);
      expect((await store.create(fork, json, [], forkOf(src))).kind).toBe('source_type_mismatch');
      await created(store, fork, text, [], forkOf(src));
      expect((await store.create(fork, text, [], forkOf(src))).kind).toBe('exists');
      expect(
        (await store.create(fork, text, [], forkOf(src, { subOffset: 0, offset: { epoch: 0, position: 0 } })))
          .kind,
      ).toBe('conflict');
      expect(await store.delete(fork)).toBe('deleted');
      expect(await store.delete(src)).toBe('deleted');
      expect(await store.head(src)).toBeNull();
    });

    it('expires a source with forks into a soft delete; an expired fork releases it', async () => {
      const store = await make();
      const [src, fork] = [path(), path()];
      const soon = (ms: number): string => new Date(Date.now() + ms).toISOString();
      await created(store, src, { ...text, expiresAt: soon(300) }, [b('a')]);
      await created(
        store,
        fork,
        { ...text, expiresAt: soon(700) },
        [],
        forkOf(src, { inheritExpiry: false }),
      );
      await sleep(400);
      expect((await store.head(src))?.gone).toBe(true);
      expect(await contents(store, fork)).toEqual(['a']);
      await sleep(400);
      expect(await store.head(fork)).toBeNull();
      expect(await store.head(src)).toBeNull();
    });

    it('renews a Stream-TTL on every read and append, never on head', async () => {
      const store = await make();
      const p = path();
      await created(store, p, { ...text, ttlSeconds: 1 }, []);
      await sleep(600);
      await store.read(p, 0, 0, 0);
      await sleep(600);
      expect(await store.head(p)).not.toBeNull();
      await store.append(p, append(['x']));
      await sleep(600);
      expect(await store.head(p)).not.toBeNull();
      await sleep(600);
      expect(await store.head(p)).toBeNull();
    });

    it("counts an owner's live streams against its share: soft delete, removal and expiry free it", async () => {
      const store = await make(100, 2);
      const [a, f, c, d, e, g, h] = Array.from({ length: 7 }, path) as [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
      ];
      const kind = async (p: string, owner: string | null, config = text, fork?: ForkRequest) =>
        (await store.create(p, config, [], fork, owner)).kind;
      expect(await kind(a, 'o1')).toBe('created');
      expect(await kind(f, 'o1', text, forkOf(a))).toBe('created');
      expect(await kind(c, 'o1')).toBe('too_many_owner_streams');
      // Another owner's share, and nobody's, are apart; an existing stream's PUT counts nothing.
      expect(await kind(c, 'o2')).toBe('created');
      expect(await kind(d, null)).toBe('created');
      expect(await kind(a, 'o1')).toBe('exists');
      // A soft delete (the source has a fork) frees the share.
      expect(await store.delete(a)).toBe('deleted');
      expect(await kind(e, 'o1')).toBe('created');
      expect(await kind(g, 'o1')).toBe('too_many_owner_streams');
      // The fork's removal (and its soft-deleted source's with it) frees it.
      expect(await store.delete(f)).toBe('deleted');
      // A sliding TTL renewed by a read keeps counting after its first window; an expired one frees.
      const ttl = { ...text, ttlSeconds: 1 };
      expect(await kind(g, 'o1', ttl)).toBe('created');
      await sleep(600);
      expect(await store.read(g, 0, 10, 1 << 20)).not.toBeNull();
      await sleep(600);
      expect(await kind(h, 'o1')).toBe('too_many_owner_streams');
      await sleep(1100);
      expect(await kind(h, 'o1')).toBe('created');
    });
  });
};
