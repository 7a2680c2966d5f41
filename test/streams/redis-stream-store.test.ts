/** The StreamStore contracts (streams, forks) on Redis, each store with its own key prefix (its own stream count). */
import { randomUUID } from 'node:crypto';
import { afterAll } from 'vitest';
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
