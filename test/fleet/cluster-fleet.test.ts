/**
 * On a real 3-master Redis Cluster: capsules spread over replicas and handed over on a join and a
 * SIGTERM (spread-scenario.ts), and a capsule added and removed live through the admin API
 * (admin-scenario.ts). Each scenario starts its own Cluster.
 */
import { adminScenario } from './admin-scenario.js';
import { clusterRedis } from './fleet-redis.js';
import { spreadScenario } from './spread-scenario.js';

adminScenario(clusterRedis);
spreadScenario(clusterRedis);
