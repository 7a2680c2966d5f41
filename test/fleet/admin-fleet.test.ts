/** The admin API scenario (admin-scenario.ts) on one redis-server, replicas as processes. */
import { adminScenario } from './admin-scenario.js';
import { standaloneRedis } from './fleet-redis.js';

adminScenario(standaloneRedis);
