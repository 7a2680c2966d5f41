/** The StreamStore contracts (streams, forks) on Redis, each store with its own key prefix (its own stream count). */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisConnection } from '../../src/log/redis-connection.js';
import { RedisStreamStore } from '../../src/streams/redis-stream-store.js';
import { testRedisUrl } from '../support/redis.js';
import { runForkContract } from './stream-store-forks.contract.js';
import { runStreamStoreContract } from './stream-store.contract.js';

const url = testRedisUrl();
// Skip only when no Redis was started AND it is not required; under REQUIRE_REDIS=1 this fails.
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';
const connections: RedisConnection[] = [];
afterAll(async () => {
  await Promise.all(connections.map((c) => c.close()));
});

const factory = (maxStreams = 1000, maxStreamsPerOwner?: number): RedisStreamStore => {
  if (!url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
  const connection = new RedisConnection(url);
  connections.push(connection);
  return new RedisStreamStore(connection, {
    bounds: { maxStreams, ...(maxStreamsPerOwner ? { maxStreamsPerOwner } : {}) },
    keyPrefix: `test:ds:${randomUUID()}`,
  });
};
runStreamStoreContract('redis', factory, skip);
runForkContract('redis', factory, skip);

describe.skipIf(skip)('RedisStreamStore catch-up pages', () => {
  it('reads a stream without its largest-message field (made before it was kept) as before', async () => {
    const prefix = `test:ds:${randomUUID()}`;
    const connection = new RedisConnection(url!);
    connections.push(connection);
    const store = new RedisStreamStore(connection, { bounds: { maxStreams: 10 }, keyPrefix: prefix });
    const config = { contentType: 'text/plain', ttlSeconds: null, expiresAt: null, closed: false };
    const messages = Array.from({ length: 200 }, (_, i) => Buffer.from(`m${i}`.padEnd(100, '.')));
    expect((await store.create('old', config, messages.slice(0, 100))).kind).toBe('created');
    const redis = new Redis(url!);
    try {
      expect(await redis.hdel(`${prefix}:{streams}:m:old`, 'mx')).toBe(1);
      // An append to such a stream does not start the field from its own messages alone.
      const huge = Buffer.alloc(5000, 'h');
      expect(
        (
          await store.append('old', {
            contentType: 'text/plain',
            entries: [...messages.slice(100), huge],
            streamSeq: null,
            producer: null,
            close: false,
          })
        ).kind,
      ).toBe('appended');
      expect(await redis.hexists(`${prefix}:{streams}:m:old`, 'mx')).toBe(0);
      const page = (await store.read('old', 0, 1000, 1 << 20))!;
      expect(page.entries).toEqual([...messages, huge]);
      const bounded = (await store.read('old', 0, 1000, 1000))!;
      expect(bounded.entries).toEqual(messages.slice(0, 10));
    } finally {
      redis.disconnect();
    }
  });
});
