/**
 * The rig of the store-fault tests: a real Redis server of the test's own (so it can be frozen with
 * SIGSTOP or have keys deleted), a simulated capsule `cap` (a heartbeat a second unless the test says
 * otherwise), and a test gateway logging `cap` to that Redis. All three stop when the test ends,
 * Redis resumed first in case the test left it frozen.
 */
import { startSimulator, type SimulatedCapsule, type SimulatorOptions } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from './gateway.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { atTestEnd, stopAfterTest } from './stop-after-test.js';

export interface RedisGateway {
  redis: RedisServer;
  sim: SimulatedCapsule;
  gw: TestGateway;
}

/** The core gives up on a submission's record after 300 ms: a frozen Redis fails submissions fast. */
export const FAST_SUBMIT_TIMEOUT = { core: { submitStoreTimeoutMs: 300 } } as const;

export const startRedisGateway = async (
  opts: {
    simulator?: SimulatorOptions;
    gateway?: Omit<TestGatewayOptions, 'capsules' | 'redisUrl'>;
  } = {},
): Promise<RedisGateway> => {
  const redis = stopAfterTest(await startRedisServer());
  const sim = stopAfterTest(await startSimulator({ heartbeatMs: 1_000, ...opts.simulator }));
  const gw = stopAfterTest(
    await startTestGateway({ capsules: { cap: sim.url }, redisUrl: redis.url, ...opts.gateway }),
  );
  atTestEnd(() => redis.resume());
  return { redis, sim, gw };
};
