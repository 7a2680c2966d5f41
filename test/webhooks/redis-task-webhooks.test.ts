/** The TaskWebhookStore contract on Redis, each store with its own key prefix. */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { afterAll } from 'vitest';
import { RedisConnection } from '../../src/log/redis-connection.js';
import { RedisTaskWebhookStore } from '../../src/webhooks/redis-task-webhooks.js';
import { testRedisUrl } from '../support/redis.js';
import { runTaskWebhookStoreContract } from './task-webhooks.contract.js';

const url = testRedisUrl();
// Skip only when no Redis was started AND it is not required; under REQUIRE_REDIS=1 this fails.
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';
const connections: RedisConnection[] = [];
afterAll(async () => {
  await Promise.all(connections.map((c) => c.close()));
});

runTaskWebhookStoreContract(
  'redis',
  async () => {
    if (!url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
    const connection = new RedisConnection(url);
    connections.push(connection);
    // Commands are not queued before the connection is up (enableOfflineQueue is off).
    if (connection.client.status !== 'ready') await once(connection.client, 'ready');
    return new RedisTaskWebhookStore(connection.client, `test:a2a:${randomUUID()}`);
  },
  skip,
);
