/**
 * Appends to one stream on Redis that arrive while its last call runs go together in one script
 * call (group commit, redis-stream-store.ts): each is still checked and written as if alone, in
 * arrival order. The embedded store, which runs each append alone, is the reference: the same appends
 * made concurrently on Redis and one after another in memory answer alike, every outcome and every
 * refusal (a bad one among them refused exactly while the others land), and store the same.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisConnection } from '../../src/log/redis-connection.js';
import { MemoryStreamStore } from '../../src/streams/memory-stream-store.js';
import { RedisStreamStore } from '../../src/streams/redis-stream-store.js';
import type { AppendInput, AppendResult, StreamConfig, StreamStore } from '../../src/streams/types.js';
import { testRedisUrl } from '../support/redis.js';

const url = testRedisUrl();
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';
const connections: RedisConnection[] = [];
const stores: StreamStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await Promise.all(connections.map((c) => c.close()));
});

const redisStore = (): RedisStreamStore => {
  if (!url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
  const connection = new RedisConnection(url);
  connections.push(connection);
  const store = new RedisStreamStore(connection, {
    bounds: { maxStreams: 100 },
    keyPrefix: `test:ds:appends:${randomUUID()}`,
  });
  stores.push(store);
  return store;
};
const memoryStore = (): MemoryStreamStore => {
  const store = new MemoryStreamStore({ maxStreams: 100 });
  stores.push(store);
  return store;
};

const TEXT: StreamConfig = { contentType: 'text/plain', ttlSeconds: null, expiresAt: null, closed: false };
const append = (message: string | null, more: Partial<AppendInput> = {}): AppendInput => ({
  contentType: message === null ? null : 'text/plain',
  entries: message === null ? [] : [Buffer.from(message)],
  streamSeq: null,
  producer: null,
  close: false,
  ...more,
});
const producer = (id: string, epoch: number, seq: number) => ({ producer: { id, epoch, seq } });

/**
 * An outcome without what differs between stores by design: a Redis epoch is a time, and only
 * Redis answers the followers' generation (the embedded store's subscriptions are its own).
 */
const comparable = (r: AppendResult): unknown => {
  if (!('meta' in r)) return r;
  const { epoch: _epoch, expiresAtMs: _expires, ...meta } = r.meta;
  const { followers: _followers, ...rest } = r as AppendResult & { followers?: number };
  return { ...rest, meta };
};
const contents = async (store: StreamStore, path: string): Promise<string[]> =>
  ((await store.read(path, 0, 1000, 1 << 20))?.entries ?? []).map((e) => e.toString());

describe.skipIf(skip)('appends to one stream on Redis, several per script call', () => {
  it('answers each its own offset in arrival order, refuses a bad one exactly and lands the others', async () => {
    const store = redisStore();
    expect((await store.create('s', TEXT, [])).kind).toBe('created');
    const calls = store.appendCalls;
    const inputs = Array.from({ length: 10 }, (_, i) =>
      i === 5 ? { ...append('typed'), contentType: 'application/json' } : append(`m${i}`),
    );
    const results = await Promise.all(inputs.map((input) => store.append('s', input)));
    // The first went alone; the nine that came while it ran went together.
    expect(store.appendCalls - calls).toBe(2);
    expect(results.map((r) => r.kind)).toEqual([
      ...Array<string>(5).fill('appended'),
      'content_type_mismatch',
      ...Array<string>(4).fill('appended'),
    ]);
    const tails = results.map((r) => ('meta' in r ? r.meta.tail : -1));
    expect(tails).toEqual([1, 2, 3, 4, 5, 5, 6, 7, 8, 9]);
    expect(await contents(store, 's')).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm6', 'm7', 'm8', 'm9']);
  });

  it('keeps every append its own semantics in a batch, as the embedded store does one by one', async () => {
    const inputs: AppendInput[] = [
      append('first'),
      append('seq b', { streamSeq: 'b' }),
      append('seq a', { streamSeq: 'a' }),
      append('seq c', { streamSeq: 'c' }),
      append('p0', producer('p', 0, 0)),
      append('p0 again', producer('p', 0, 0)),
      append('p2', producer('p', 0, 2)),
      append('p1', producer('p', 0, 1)),
      append('q1', producer('q', 0, 1)),
      append('e1 s1', producer('p', 1, 1)),
      append('e1 s0', producer('p', 1, 0)),
      append('e0 s2', producer('p', 0, 2)),
      { ...append('json'), contentType: 'application/json' },
      append('many', { entries: [Buffer.from('x'), Buffer.from('yy'), Buffer.from('zzz')] }),
      append('closing', { ...producer('p', 1, 1), close: true }),
      append('after close'),
      append('closing', { ...producer('p', 1, 1), close: true }),
      append(null, { close: true }),
      append('stale', producer('p', 0, 3)),
    ];
    const redis = redisStore();
    const memory = memoryStore();
    for (const store of [redis, memory]) expect((await store.create('s', TEXT, [])).kind).toBe('created');
    const calls = redis.appendCalls;
    const batched = await Promise.all(inputs.map((input) => redis.append('s', input)));
    expect(redis.appendCalls - calls).toBe(2);
    const oneByOne: AppendResult[] = [];
    for (const input of inputs) oneByOne.push(await memory.append('s', input));
    expect(batched.map(comparable)).toEqual(oneByOne.map(comparable));
    expect(batched.map((r) => r.kind)).toEqual([
      'appended',
      'appended',
      'stream_seq_conflict',
      'appended',
      'appended',
      'duplicate',
      'producer_seq_gap',
      'appended',
      'producer_seq_gap',
      'producer_epoch_seq_not_zero',
      'appended',
      'stale_producer_epoch',
      'content_type_mismatch',
      'appended',
      'appended',
      'closed',
      'duplicate',
      'duplicate',
      'stale_producer_epoch',
    ]);
    expect(await contents(redis, 's')).toEqual(await contents(memory, 's'));
  });

  it('answers every append of a batch for a stream that is not there', async () => {
    const store = redisStore();
    const results = await Promise.all([1, 2, 3].map((i) => store.append('nowhere', append(`m${i}`))));
    expect(results).toEqual([{ kind: 'not_found' }, { kind: 'not_found' }, { kind: 'not_found' }]);
  });

  it('bounds a call to 64 appends: the rest go in the next', async () => {
    const store = redisStore();
    expect((await store.create('s', TEXT, [])).kind).toBe('created');
    const calls = store.appendCalls;
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => store.append('s', append(`m${i}`))),
    );
    // One alone, then 64, then 35.
    expect(store.appendCalls - calls).toBe(3);
    expect(results.map((r) => ('meta' in r ? r.meta.tail : -1))).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
  });
});
