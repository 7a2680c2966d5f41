/** The fleet failover scenario (failover-scenario.ts) on one redis-server. */
import { failoverScenario } from './failover-scenario.js';
import { standaloneRedis } from './fleet-redis.js';

failoverScenario(standaloneRedis);
