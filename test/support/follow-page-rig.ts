/**
 * The rig of the browser follow tests: one Chromium for the test file and, per test, a simulated
 * capsule `alpha` that queues its tasks, a test gateway in front of it (15 s heartbeats) that has
 * already bundled its client module, and a fresh page. All of it, and any proxy the test puts in
 * between (`stopAfterTest`), is closed when the test ends.
 */
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { chromiumForFile } from '../browser/chromium.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from './gateway.js';
import { atTestEnd, stopAfterTest } from './stop-after-test.js';

export interface FollowPageRig {
  /** Starts the test's capsule, gateway (with `gateway` added to the defaults) and page. */
  start(gateway?: Omit<TestGatewayOptions, 'capsules'>): Promise<{ sim: SimulatedCapsule; gw: TestGateway }>;
  /** The test's page and gateway, once `start` has run. */
  readonly page: Page;
  readonly gw: TestGateway;
}

/** Call in a describe: registers the file's Chromium; each test then calls `start`. */
export const followPageRig = (): FollowPageRig => {
  const browser = chromiumForFile();
  let current: { page: Page; gw: TestGateway } | null = null;
  const started = () => {
    if (!current) throw new Error('call start() first');
    return current;
  };
  return {
    async start(gateway = {}) {
      atTestEnd(() => {
        current = null;
      });
      const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
      const gw = stopAfterTest(
        await startTestGateway({
          ...gateway,
          capsules: { alpha: sim.url },
          config: { heartbeatMs: 15_000, ...gateway.config },
        }),
      );
      // Bundle the client module once before any proxy can cut the request that triggers it.
      expect((await fetch(`${gw.baseUrl}/client/murmur-gateway.js`)).status).toBe(200);
      const page = stopAfterTest(await browser().newPage());
      current = { page, gw };
      return { sim, gw };
    },
    get page() {
      return started().page;
    },
    get gw() {
      return started().gw;
    },
  };
};
