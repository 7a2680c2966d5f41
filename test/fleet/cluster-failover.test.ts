/**
 * The fleet failover scenario (failover-scenario.ts) on a real 3-master Redis Cluster: leases,
 * fencing tokens, the replica set, pub/sub and the registry all through ioredis's Cluster client.
 */
import { failoverScenario } from './failover-scenario.js';
import { clusterRedis } from './fleet-redis.js';

failoverScenario(clusterRedis);
