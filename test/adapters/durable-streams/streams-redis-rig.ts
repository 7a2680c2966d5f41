/**
 * The rig of the general-stream tests on a redis-server of their own: gateways started on it (each
 * closed after the test), Redis itself (stopped after the test, restartable from a snapshot), and the
 * few requests every case makes.
 */
import { afterEach, expect } from 'vitest';
import type { RedisStore } from '../../../src/log/redis-store.js';
import { startRedisServer, type RedisServer } from '../../support/redis-server.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';

export interface StreamsRedisRig {
  /** A redis-server of the test's own (stopped after it). */
  redis(): Promise<RedisServer>;
  /** A gateway with writable general streams on `redisUrl`, under its own key prefix. */
  start(redisUrl: string, keyPrefix: string, longPollMs?: number): Promise<TestGateway>;
  /** Redis stopped and started again (from its last snapshot); resolves once `gw` reconnected. */
  restart(redis: RedisServer, gw: TestGateway): Promise<void>;
}

/** Registers its own cleanup: call once at a test file's top level. */
export const streamsRedisRig = (): StreamsRedisRig => {
  let server: RedisServer | null = null;
  const gateways: TestGateway[] = [];
  afterEach(async () => {
    await Promise.all(gateways.splice(0).map((g) => g.close()));
    await server?.stop();
    server = null;
  });
  return {
    redis: async () => (server = await startRedisServer()),
    start: async (redisUrl, keyPrefix, longPollMs = 20_000) => {
      const gw = await startTestGateway({
        capsules: {},
        redisUrl,
        config: { longPollMaxMs: longPollMs },
        extra: { durableStreams: { writable: true } },
        tuning: { streams: { keyPrefix } },
      });
      gateways.push(gw);
      return gw;
    },
    restart: async (redis, gw) => {
      const client = (gw.gateway.store as RedisStore).connection.client;
      // (events.once would reject on the connection's error events while Redis is down.)
      const reconnected = new Promise<void>((resolve) => client.once('ready', () => resolve()));
      await redis.stop();
      await redis.start();
      await reconnected;
    },
  };
};

export const text = { 'content-type': 'text/plain' };

/** Append `body`; its `Stream-Next-Offset`. */
export const append = async (url: string, body: string): Promise<string> => {
  const res = await fetch(url, { method: 'POST', headers: text, body });
  expect(res.status).toBe(204);
  return res.headers.get('stream-next-offset')!;
};

export const epochOf = (offset: string): number => Number(offset.split('_')[0]);
