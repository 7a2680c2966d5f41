/**
 * The demo as `--demo` runs it, for tests: the simulated fleet behind a test gateway on a free
 * loopback port, with what `--demo` adds to the configuration (its capsules, door tokens included,
 * and its loopback CORS origins), the gateway told the capsules are fresh, and the workloads started
 * once every capsule is watched.
 */
import { afterAll, beforeAll } from 'vitest';
import { startDemo, type Demo } from '../../src/demo.js';
import { DEMO_CORS_ORIGINS } from '../../src/process.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from './gateway.js';

/** Configuration beyond the demo's (keys, say). */
type Extra = NonNullable<TestGatewayOptions['extra']>;

export interface DemoGateway {
  demo: Demo;
  gw: TestGateway;
  close(): Promise<void>;
}

export const startDemoGateway = async (extra: Extra = {}): Promise<DemoGateway> => {
  const demo = await startDemo();
  const gw = await startTestGateway({
    capsules: {},
    extra: { ...extra, capsules: demo.capsules },
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

/** `startDemoGateway` for a whole test file: started before its first test, closed after its last. */
export const demoGatewayForFile = (extra: Extra = {}): (() => TestGateway) => {
  let running: DemoGateway | null = null;
  beforeAll(async () => {
    running = await startDemoGateway(extra);
  });
  afterAll(() => running?.close());
  return () => {
    if (!running) throw new Error('the demo starts in beforeAll: use it inside a test');
    return running.gw;
  };
};
