/**
 * The SDK flow through a proxy that cuts every SSE connection after a short time and holds no idle
 * connection: the client reconnects or falls back to long-poll, and the final state is still exact.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

describe('@flue/sdk behind an SSE-cutting proxy', () => {
  for (const sseCutMs of [150, 1_200]) {
    it(`observe(sse) stays exact when SSE is cut every ${sseCutMs} ms`, async () => {
      const sim: SimulatedCapsule = await startSimulator({ frameDelayMs: 20 });
      closers.push(() => sim.stop());
      const gw: TestGateway = await startTestGateway({
        capsules: { cap: sim.url },
        config: { longPollMaxMs: 300, idleControlMs: 200, heartbeatMs: 100 },
      });
      closers.push(() => gw.close());
      const proxy: CuttingProxy = await startCuttingProxy(gw.baseUrl, { sseCutMs, idleCutMs: 800 });
      closers.push(() => proxy.close());
      const client = createFlueClient({ url: `${proxy.url}/flue/cap/conv-proxy` });
      const first = await client.send({ message: { kind: 'user', body: 'first' } });
      await client.wait(first);
      const obs = client.observe({ live: 'sse' });
      closers.push(async () => obs.close());
      const settledCount = () => obs.getSnapshot().conversation?.settlements.length ?? 0;
      await new Promise<void>((resolve) => {
        const un = obs.subscribe(() => {
          if (obs.getSnapshot().phase === 'live') {
            un();
            resolve();
          }
        });
      });
      const admissions = [];
      // Sequential sends so the single-task capsule runs each one (no busy rejections).
      for (let i = 0; i < 4; i++) {
        const a = await client.send({
          message: { kind: 'user', body: `#sim {"chunks":6,"tools":1,"turns":2,"delayMs":40}` },
        });
        await client.wait(a);
        admissions.push(a);
      }
      const history = await client.history();
      expect(history.settlements).toHaveLength(5);
      await new Promise<void>((resolve) => {
        const check = () => {
          if (settledCount() === 5) {
            un();
            resolve();
          }
        };
        const un = obs.subscribe(check);
        check();
      });
      expect(obs.getSnapshot().conversation?.messages).toEqual(history.messages);
      expect(obs.getSnapshot().conversation?.settlements).toEqual(history.settlements);
      expect(proxy.stats.sse).toBeGreaterThan(0);
      expect(proxy.stats.sseCut).toBeGreaterThan(0);
      if (sseCutMs < 1_000) expect(proxy.stats.longPolls).toBeGreaterThan(0); // fell back to long-poll
    });
  }
});
