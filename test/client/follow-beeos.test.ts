/**
 * followBeeos against the real gateway: a task's envelopes once each by offset, through a proxy
 * that cuts every connection after 300 ms, ending on `task_terminal`; equal to GET …/messages.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { followBeeos, type BeeosEnvelope, type Subscription } from '../../src/client/index.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let proxy: CuttingProxy | null = null;
let sub: Subscription | null = null;
afterEach(async () => {
  sub?.close();
  await proxy?.close();
  await gw?.close();
  await sim?.stop();
  sim = gw = proxy = sub = null;
});

describe('followBeeos (Node)', () => {
  it('a task through a cutting proxy: every envelope once, in order, then the end', async () => {
    sim = await startSimulator({ taskAcceptance: 'queue' });
    gw = await startTestGateway({ capsules: { alpha: sim.url } });
    proxy = await startCuttingProxy(gw.baseUrl, { lifetimeMs: 300 });
    const created = await fetch(`${gw.baseUrl}/api/v1/agents/alpha/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: '#sim {"chunks":150,"thinking":3,"tools":2,"delayMs":4}' }),
    });
    const taskId = ((await created.json()) as { data: { task_id: string } }).data.task_id;
    const envelopes: BeeosEnvelope[] = [];
    const ended = new Promise<string>((resolve) => {
      sub = followBeeos({
        gateway: proxy!.url,
        capsule: 'alpha',
        task: taskId,
        includeDeltas: true,
        tuning: { backoffMs: 50 },
        onEnvelope: (e) => envelopes.push(e),
        onEnd: resolve,
      });
    });
    expect(await ended).toBe('task_terminal');
    const page = await fetch(
      `${gw.baseUrl}/api/v1/agents/alpha/tasks/${taskId}/messages?include_deltas=true&limit=1000`,
    );
    const { data } = (await page.json()) as { data: { messages: BeeosEnvelope[] } };
    expect(envelopes).toEqual(data.messages);
    expect(proxy.kills).toBeGreaterThan(0);
  });
});
