/** Per-test access to the shared redis-server started by global-redis.ts. */
import { inject } from 'vitest';
import { randomUUID } from 'node:crypto';

/** The shared Redis URL, or undefined when Redis tests must skip (never under REQUIRE_REDIS=1). */
export const testRedisUrl = (): string | undefined => {
  try {
    return inject('redisUrl') || undefined;
  } catch {
    return undefined;
  }
};

/** A unique capsule id per test, so tests sharing one Redis never see each other's keys. */
export const uniqueCapsule = (prefix = 'cap'): string => `${prefix}-${randomUUID().slice(0, 8)}`;

/** The stores a store-agnostic test runs on: the embedded one, and the shared Redis (when started). */
export const STORE_CASES = [['embedded', undefined] as const, ['Redis', testRedisUrl()] as const];

/** A Redis case is skipped only when no Redis was started AND it is not required (REQUIRE_REDIS=1). */
export const noRedis = (name: string, url: string | undefined): boolean =>
  name === 'Redis' && !url && process.env.REQUIRE_REDIS !== '1';

/** The case's Redis URL (undefined: the embedded store); a Redis case without one fails. */
export const urlFor = (name: string, url: string | undefined): string | undefined => {
  if (name === 'Redis' && !url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
  return url;
};
