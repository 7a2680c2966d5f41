/**
 * The Redis a fleet scenario runs on, started fresh per scenario: one redis-server, or a real 3-master
 * Cluster. Scenarios take one of these so the standalone and Cluster runs share one test body.
 */
import type { RedisConfig } from '../../src/config/schema.js';
import { redisCliAvailable, startRedisCluster } from '../support/redis-cluster.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';

export interface FleetRedis {
  /** What the replicas (and the test's own store) are given as `redis`. */
  readonly config: RedisConfig;
  stop(): Promise<void>;
}

export interface FleetRedisKind {
  /** For test names and reported figures. */
  readonly label: string;
  /** Skip when the servers are missing, unless REQUIRE_REDIS=1 (then starting fails the test). */
  readonly skip: boolean;
  start(): Promise<FleetRedis>;
}

const require = process.env.REQUIRE_REDIS === '1';

export const standaloneRedis: FleetRedisKind = {
  label: 'redis',
  skip: !redisServerAvailable() && !require,
  start: async () => {
    const server = await startRedisServer();
    return { config: server.url, stop: () => server.stop() };
  },
};

export const clusterRedis: FleetRedisKind = {
  label: 'cluster',
  skip: !redisCliAvailable() && !require,
  start: async () => {
    const cluster = await startRedisCluster();
    return { config: { cluster: cluster.urls }, stop: () => cluster.stop() };
  },
};
