/** The spread and handover scenario (spread-scenario.ts) on one redis-server. */
import { standaloneRedis } from './fleet-redis.js';
import { spreadScenario } from './spread-scenario.js';

spreadScenario(standaloneRedis);
