/**
 * The store contract on Redis Streams, plus what only Redis has: epochs that change when the log is
 * lost, several writers on one capsule, the `{capsule}` hash-tag layout, failing fast when it is down.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { RetentionPolicy } from '../../src/log/store.js';
import { freePort } from '../support/redis-server.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { frame, readAll, runStoreContract } from './store.contract.js';

const url = testRedisUrl();
// Skip only when no Redis was started AND it is not required; under REQUIRE_REDIS=1 this fails.
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';
const redisUrl = (): string => {
  if (!url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
  return url;
};
const makeStore = (retention?: RetentionPolicy, keyPrefix?: string): RedisStore =>
  new RedisStore(redisUrl(), { retention, keyPrefix });

runStoreContract('redis', (retention) => makeStore(retention), skip);

describe.skipIf(skip)('RedisStore', () => {
  let client: Redis;
  const stores: RedisStore[] = [];
  const open = (retention?: RetentionPolicy, keyPrefix?: string): RedisStore => {
    const store = makeStore(retention, keyPrefix);
    stores.push(store);
    return store;
  };
  beforeAll(() => {
    client = new Redis(redisUrl());
  });
  afterAll(async () => {
    await client.quit();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  it('starts a new epoch with offsets from 1 when the log keys are deleted', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const before = await store.append(cap, [frame('a'), frame('b'), frame('c')]);
    await client.del(`mg:{${cap}}:log`, `mg:{${cap}}:meta`);
    const after = await store.append(cap, [frame('new')]);
    expect(after.offsets).toEqual([1]);
    expect(after.epoch).not.toBe(before.epoch);
    expect(await store.position(cap)).toEqual({ head: 1, first: 1, epoch: after.epoch });
    expect((await store.read(cap, 0, 10)).records.map((r) => r.kind === 'frame' && r.upstreamId)).toEqual([
      'new',
    ]);
  });

  it('starts a new epoch and drops stale entries when only the meta key is lost', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const before = await store.append(cap, [frame('a'), frame('b')]);
    await client.del(`mg:{${cap}}:meta`);
    const position = await store.position(cap);
    expect(position.epoch).not.toBe(before.epoch);
    expect(position).toMatchObject({ head: 0, first: 1 });
    expect((await store.append(cap, [frame('c')])).offsets).toEqual([1]);
    expect((await store.read(cap, 0, 10)).records).toHaveLength(1);
  });

  it('keeps one epoch across store instances (a gateway restart on the same Redis)', async () => {
    const cap = uniqueCapsule();
    const first = await open().append(cap, [frame('a')]);
    const second = await open().append(cap, [frame('b')]);
    expect(second).toEqual({ offsets: [2], epoch: first.epoch });
  });

  it('two writers appending concurrently to one capsule produce no duplicate and no hole', async () => {
    const cap = uniqueCapsule();
    const writers = [open(), open()];
    const got = await Promise.all(
      writers.flatMap((store, w) =>
        Array.from({ length: 10 }, async (_, a) => {
          const offsets: number[] = [];
          for (let i = 0; i < 100; i++) {
            offsets.push(...(await store.append(cap, [frame(`${w}:${a}:${i}`)])).offsets);
          }
          return offsets;
        }),
      ),
    );
    const all = got.flat().sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: 2000 }, (_, i) => i + 1));
    const records = await readAll(writers[0]!, cap);
    expect(records.map((r) => r.offset)).toEqual(all);
    expect(new Set(records.map((r) => r.kind === 'frame' && r.upstreamId)).size).toBe(2000);
  });

  it('keeps all keys of a capsule under its {capsule} hash tag, with entry ids <offset>-0', async () => {
    const cap = uniqueCapsule();
    const store = open(undefined, 'tagtest');
    await store.append(cap, [frame('a'), frame('b')]);
    expect(store.keys(cap)).toEqual({ log: `tagtest:{${cap}}:log`, meta: `tagtest:{${cap}}:meta` });
    expect((await client.keys(`*${cap}*`)).sort()).toEqual([`tagtest:{${cap}}:log`, `tagtest:{${cap}}:meta`]);
    expect(await client.type(`tagtest:{${cap}}:log`)).toBe('stream');
    expect(await client.type(`tagtest:{${cap}}:meta`)).toBe('hash');
    const entries = await client.xrange(`tagtest:{${cap}}:log`, '-', '+');
    expect(entries.map(([id]) => id)).toEqual(['1-0', '2-0']);
    expect(entries[0]![1]).toEqual([
      'r',
      JSON.stringify(frame('a', JSON.parse(entries[0]![1][1]!).receivedAt)),
    ]);
    expect(await client.hget(`tagtest:{${cap}}:meta`, 'offset')).toBe('2');
  });

  it('fails fast with store_unavailable when Redis is not there, and ping says false', async () => {
    const port = await freePort();
    const store = new RedisStore(`redis://127.0.0.1:${port}`);
    stores.push(store);
    const err = await store.append('c', [frame('a')]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('store_unavailable');
    expect((await store.read('c', 0, 1).catch((e: unknown) => e)) as GatewayError).toMatchObject({
      code: 'store_unavailable',
    });
    expect(await store.ping()).toBe(false);
  });
});
