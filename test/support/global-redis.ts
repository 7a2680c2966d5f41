/**
 * vitest global setup: one shared redis-server for the run, its URL in REDIS_TEST_URL. Tests isolate
 * themselves with a unique key prefix (capsule id). Without redis-server the Redis tests skip, unless
 * REQUIRE_REDIS=1 (CI), where a missing Redis fails the run instead.
 */
import type { TestProject } from 'vitest/node';
import { redisServerAvailable, startRedisServer, type RedisServer } from './redis-server.js';

let server: RedisServer | null = null;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!redisServerAvailable()) {
    if (process.env.REQUIRE_REDIS === '1') {
      throw new Error('REQUIRE_REDIS=1 but redis-server is not installed (apt-get install redis-server)');
    }
    console.warn('redis-server not found: Redis tests will be skipped (set REQUIRE_REDIS=1 to fail instead)');
    return async () => {};
  }
  server = await startRedisServer();
  project.provide('redisUrl', server.url);
  process.env.REDIS_TEST_URL = server.url;
  return async () => {
    await server?.stop('SIGTERM');
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}
