/**
 * The demo as `--demo` runs it, for tests: the simulated fleet behind a test gateway on a free
 * loopback port, with what `--demo` adds to the configuration (its capsules, door tokens included,
 * and its loopback CORS origins), the gateway told the capsules are fresh, and the workloads started
 * once every capsule is watched.
 */
import { startDemo, type Demo } from '../../src/demo.js';
import { DEMO_CORS_ORIGINS } from '../../src/process.js';
import { startTestGateway, type TestGateway } from './gateway.js';

export interface DemoGateway {
  demo: Demo;
  gw: TestGateway;
  close(): Promise<void>;
}

export const startDemoGateway = async (): Promise<DemoGateway> => {
  const demo = await startDemo();
  const gw = await startTestGateway({
    capsules: {},
    extra: { capsules: demo.capsules },
    config: { corsOrigins: DEMO_CORS_ORIGINS },
    tuning: demo.tuning,
  });
  await demo.startWhenWatched(gw.gateway.upstreams);
  return {
    demo,
    gw,
    async close() {
      await gw.close();
      await demo.stop();
    },
  };
};
