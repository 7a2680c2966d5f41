/**
 * The Redis store's read cache (message-cache.ts) against real Redis: several stores on one key
 * prefix are several replicas of one deployment; a store with `readCacheBytes: 0` is the uncached
 * reference every cached answer must equal, whole (messages, meta, tail, epoch).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisConnection } from '../../src/log/redis-connection.js';
import { MESSAGE_OVERHEAD } from '../../src/streams/message-cache.js';
import { RedisStreamStore } from '../../src/streams/redis-stream-store.js';
import type { AppendInput, ForkRequest, StreamConfig, StreamMeta } from '../../src/streams/types.js';
import { testRedisUrl } from '../support/redis.js';

const url = testRedisUrl();
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';

const text: StreamConfig = { contentType: 'text/plain', ttlSeconds: null, expiresAt: null, closed: false };
const append = (entries: Buffer[]): AppendInput => ({
  contentType: 'text/plain',
  entries,
  streamSeq: null,
  producer: null,
  close: false,
});
/** Message `i` of a stream: its own text, 1 to 900 bytes (mixed sizes, deterministic). */
const message = (tag: string, i: number): Buffer =>
  Buffer.from(`${tag}${i}:`.padEnd(1 + ((i * 379) % 900), String.fromCharCode(97 + (i % 26))));
const messages = (tag: string, from: number, count: number): Buffer[] =>
  Array.from({ length: count }, (_, k) => message(tag, from + k));
/** A read's answer whole, as one string (compared far faster than arrays of buffers). */
const shown = (read: { meta: StreamMeta | null; entries: Buffer[] } | null): string =>
  read === null
    ? 'null'
    : `${JSON.stringify(read.meta)} ${read.entries.map((e) => e.length).join(',')} ${Buffer.concat(read.entries).toString('latin1')}`;
/** Page bounds (maxEntries, maxBytes): by count, by bytes, and one message a page. */
const BOUNDS = [
  [1000, 1 << 20],
  [70, 1 << 20],
  [1000, 5000],
  [1000, 2500],
  [3, 1],
] as const;

describe.skipIf(skip)('RedisStreamStore read cache', () => {
  const connections: RedisConnection[] = [];
  const stores: RedisStreamStore[] = [];
  const clients: Redis[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    for (const c of clients.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.close()));
  });
  /** A replica's store on `prefix`; `readCacheBytes` 0: uncached. */
  const replica = (prefix: string, readCacheBytes?: number): RedisStreamStore => {
    if (!url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
    const connection = new RedisConnection(url);
    connections.push(connection);
    const store = new RedisStreamStore(connection, {
      bounds: { maxStreams: 1000 },
      keyPrefix: prefix,
      ...(readCacheBytes !== undefined ? { readCacheBytes } : {}),
    });
    stores.push(store);
    return store;
  };
  const created = async (
    store: RedisStreamStore,
    path: string,
    initial: Buffer[],
    fork?: ForkRequest,
  ): Promise<StreamMeta> => {
    const r = await store.create(path, text, initial, fork);
    if (r.kind !== 'created') throw new Error(`create answered ${r.kind}`);
    return r.meta;
  };
  /**
   * Every page of `path` (`tail` messages) from a grid of positions under every bound, then paged
   * from the start as a reader does (every message once, in order), as `store` answers them.
   */
  const answers = async (store: RedisStreamStore, path: string, tail: number): Promise<string[]> => {
    const out: string[] = [];
    const afters = [0, 1, 17, 39, 40, 41, 63, 64, 100, 199, tail - 65, tail - 2, tail - 1, tail];
    for (const [maxEntries, maxBytes] of BOUNDS) {
      for (const after of new Set(afters.filter((a) => a >= 0 && a <= tail)))
        out.push(shown(await store.read(path, after, maxEntries, maxBytes)));
      // One message a page is read from the grid alone (paged, it is a read per message).
      if (maxBytes === 1) continue;
      const seen: Buffer[] = [];
      for (let after = 0, pages = 0; after < tail && pages < 2000; pages++) {
        const page = (await store.read(path, after, maxEntries, maxBytes))!;
        out.push(shown(page));
        seen.push(...page.entries);
        after += page.entries.length;
      }
      expect(seen.length).toBe(tail);
      out.push(shown({ meta: null, entries: seen }));
    }
    return out;
  };
  /**
   * The cached replica answers every read exactly as the uncached one. Both first read the meta, so
   * each holds the same furthest position seen (which decides how a read is made, hence its page).
   */
  const sameEverywhere = async (
    cached: RedisStreamStore,
    uncached: RedisStreamStore,
    path: string,
    tail: number,
  ): Promise<void> => {
    expect((await cached.head(path))?.tail).toBe(tail);
    expect((await uncached.head(path))?.tail).toBe(tail);
    expect(await answers(cached, path, tail)).toEqual(await answers(uncached, path, tail));
  };
  /** The XRANGE commands Redis runs on `dataKey` (from scripts too) while `run` runs. */
  const xrangesDuring = async (dataKey: string, run: () => Promise<void>): Promise<number> => {
    const monitor = await new Redis(url!).monitor();
    clients.push(monitor as unknown as Redis);
    let count = 0;
    const marker = `end-${randomUUID()}`;
    const ended = new Promise<void>((resolve) =>
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'xrange' && args[1] === dataKey) count++;
        if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) resolve();
      }),
    );
    await run();
    // MONITOR reports in the order Redis ran the commands: once it reports this, it reported them all.
    const probe = new Redis(url!);
    clients.push(probe);
    await probe.echo(marker);
    await ended;
    return count;
  };

  it('answers every page as an uncached replica does, cold and warm; warm, it reads no message from Redis', async () => {
    const prefix = `test:ds:${randomUUID()}`;
    const [cached, uncached] = [replica(prefix), replica(prefix, 0)];
    const path = `cache/${randomUUID()}`;
    // Written through the uncached replica: the cached one starts cold and fills from its reads.
    await created(uncached, path, messages('m', 1, 150));
    for (let i = 151; i <= 270; i += 40) await uncached.append(path, append(messages('m', i, 40)));
    // And some through the cached one: its own appends are cached as they are written.
    await cached.append(path, append(messages('m', 271, 30)));
    expect(uncached.cachedBytes).toBe(0);
    await sameEverywhere(cached, uncached, path, 300);
    expect(cached.cachedBytes).toBeGreaterThan(0);
    // Warm: the same pages again, and Redis answers the meta alone (no message read from it).
    const dataKey = `${prefix}:{streams}:d:${path}`;
    let warm: string[] = [];
    expect(await xrangesDuring(dataKey, async () => void (warm = await answers(cached, path, 300)))).toBe(0);
    expect(warm).toEqual(await answers(uncached, path, 300));
    // The uncached replica reads them from Redis every time.
    expect(
      await xrangesDuring(dataKey, () => answers(uncached, path, 300).then(() => undefined)),
    ).toBeGreaterThan(0);
  });

  it('renews a sliding Stream-TTL on a read answered from the cache', async () => {
    const prefix = `test:ds:${randomUUID()}`;
    const store = replica(prefix);
    const path = `cache/${randomUUID()}`;
    const r = await store.create(path, { ...text, ttlSeconds: 60 }, messages('t', 1, 100));
    expect(r.kind).toBe('created');
    const dataKey = `${prefix}:{streams}:d:${path}`;
    const redis = new Redis(url!);
    clients.push(redis);
    let expiry = Number(await redis.hget(`${prefix}:{streams}:m:${path}`, 'expms'));
    for (let i = 0; i < 3; i++) {
      // The clock moves on (a few ms): a renewal is a later expiry.
      for (const until = Date.now() + 3; Date.now() < until;) await new Promise((res) => setTimeout(res, 1));
      let read: Awaited<ReturnType<RedisStreamStore['read']>> = null;
      // The messages come from the cache (created here): no XRANGE, and still the renewal.
      expect(
        await xrangesDuring(dataKey, async () => void (read = await store.read(path, 0, 1000, 1 << 20))),
      ).toBe(0);
      const stored = Number(await redis.hget(`${prefix}:{streams}:m:${path}`, 'expms'));
      expect(stored).toBeGreaterThan(expiry);
      expect(read!.meta.expiresAtMs).toBe(stored);
      expect(read!.entries.length).toBe(100);
      expiry = stored;
    }
  });

  it('never answers a deleted stream from its cache: 404 after another replica deletes it, the new one after it is created again', async () => {
    const prefix = `test:ds:${randomUUID()}`;
    const [here, there] = [replica(prefix), replica(prefix)];
    const path = `cache/${randomUUID()}`;
    const epochs: number[] = [];
    for (let round = 0; round < 30; round++) {
      // Same sizes every round: only the contents tell one incarnation from the next.
      const old = messages(`old${round}-`, 1, 80);
      const fresh = messages(`new${round}-`, 1, 80);
      const meta0 = await created(here, path, old);
      epochs.push(meta0.epoch);
      expect(shown(await here.read(path, 0, 1000, 1 << 20))).toBe(shown({ meta: meta0, entries: old }));
      expect(await there.delete(path)).toBe('deleted');
      // Every other round, this replica reads between the delete and the new create; the others
      // it learns of both at once, on its next read.
      if (round % 2 === 0) expect(await here.read(path, 0, 1000, 1 << 20)).toBeNull();
      await created(there, path, fresh);
      const read = (await here.read(path, 0, 1000, 1 << 20))!;
      expect(shown({ meta: null, entries: read.entries })).toBe(shown({ meta: null, entries: fresh }));
      expect(read.meta.epoch).toBeGreaterThan(epochs.at(-1)!);
      const part = (await here.read(path, 40, 10, 1 << 20))!.entries;
      expect(shown({ meta: null, entries: part })).toBe(shown({ meta: null, entries: fresh.slice(40, 50) }));
      expect(await there.delete(path)).toBe('deleted');
    }
  });

  it('mints a new epoch for every stream created, even many within one millisecond', async () => {
    const store = replica(`test:ds:${randomUUID()}`);
    const path = `cache/${randomUUID()}`;
    const epochs: number[] = [];
    for (let i = 0; i < 40; i++) {
      epochs.push((await created(store, path, [])).epoch);
      expect(await store.delete(path)).toBe('deleted');
    }
    // Strictly increasing: no two incarnations share one.
    expect(epochs.every((e, i) => i === 0 || e > epochs[i - 1]!)).toBe(true);
  });

  it('reads a fork as an uncached replica does: inherited messages, a cut message, its own', async () => {
    const prefix = `test:ds:${randomUUID()}`;
    const [cached, uncached] = [replica(prefix), replica(prefix, 0)];
    const source = `cache/${randomUUID()}`;
    const fork = `cache/${randomUUID()}`;
    const cut = `cache/${randomUUID()}`;
    const sourceMeta = await created(cached, source, messages('s', 1, 120));
    // The source read through the cached replica: its pages are cached under the source's epoch.
    await sameEverywhere(cached, uncached, source, 120);
    const forkRequest = (offset: number, subOffset = 0): ForkRequest => ({
      source,
      offset: { epoch: sourceMeta.epoch, position: offset },
      subOffset,
      inheritContentType: false,
      inheritExpiry: true,
    });
    await created(cached, fork, messages('f', 1, 30), forkRequest(70));
    // A byte sub-offset copies the cut part of the source's next message as the fork's first own one.
    await created(cached, cut, messages('c', 1, 5), forkRequest(90, 3));
    await cached.append(source, append(messages('late', 1, 20)));
    await cached.append(fork, append(messages('f', 31, 140)));
    await uncached.append(cut, append(messages('c', 6, 100)));
    const whole = async (path: string): Promise<Buffer[]> =>
      (await uncached.read(path, 0, 100_000, 1 << 30))!.entries;
    expect(await whole(fork)).toEqual([...messages('s', 1, 70), ...messages('f', 1, 170)]);
    expect(await whole(cut)).toEqual([
      ...messages('s', 1, 90),
      message('s', 91).subarray(0, 3),
      ...messages('c', 1, 105),
    ]);
    // Each page is read more than once (the grid, then paged): cold, then warm.
    await sameEverywhere(cached, uncached, fork, 240);
    await sameEverywhere(cached, uncached, cut, 196);
    await sameEverywhere(cached, uncached, source, 140);
  });

  it('stays within its byte budget, every page still exact', async () => {
    const prefix = `test:ds:${randomUUID()}`;
    const budget = 20 * (500 + MESSAGE_OVERHEAD);
    const [cached, uncached] = [replica(prefix, budget), replica(prefix, 0)];
    const paths = [`cache/${randomUUID()}`, `cache/${randomUUID()}`];
    for (const path of paths) {
      await created(cached, path, messages(path, 1, 60));
      expect(cached.cachedBytes).toBeLessThanOrEqual(budget);
      for (let i = 61; i <= 200; i += 35) {
        await cached.append(path, append(messages(path, i, 35)));
        expect(cached.cachedBytes).toBeLessThanOrEqual(budget);
      }
    }
    // One message larger than the whole budget: read and answered, not kept.
    await cached.append(paths[0]!, append([Buffer.alloc(budget + 1, 'x')]));
    expect(cached.cachedBytes).toBeLessThanOrEqual(budget);
    // The same furthest position seen on both (it decides how a read is made, hence its page).
    for (const path of paths) expect((await uncached.head(path))!.tail).toBe(path === paths[0] ? 201 : 200);
    for (let pass = 0; pass < 2; pass++) {
      for (const path of paths) {
        for (const [maxEntries, maxBytes] of BOUNDS) {
          for (let after = 0, pages = 0; pages < 300; pages++) {
            const page = (await cached.read(path, after, maxEntries, maxBytes))!;
            expect(shown(page)).toBe(shown(await uncached.read(path, after, maxEntries, maxBytes)));
            expect(cached.cachedBytes).toBeLessThanOrEqual(budget);
            if (page.entries.length === 0) break;
            after += page.entries.length;
          }
        }
      }
    }
    expect(cached.cachedBytes).toBeGreaterThan(0);
  });
});
