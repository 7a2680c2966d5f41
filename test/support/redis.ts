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
