/**
 * followCapsule in Node (streamed-fetch SSE and long-poll) against a real gateway and simulator:
 * every record of the log once, in offset order, the poll's record objects on both transports,
 * including across cut connections.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CapsuleRecord, Subscription } from '../../src/client/index.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { runBusy } from './busy-capsule.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { expectExactLog, follow as followAlpha } from './follow-helpers.js';

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let proxy: CuttingProxy | null = null;
const subs: Subscription[] = [];

afterEach(async () => {
  for (const s of subs.splice(0)) s.close();
  await proxy?.close();
  await gw?.close();
  await sim?.stop();
  sim = gw = proxy = null;
});

const setup = async (): Promise<{ sim: SimulatedCapsule; gw: TestGateway }> => {
  sim = await startSimulator({ taskAcceptance: 'queue' });
  gw = await startTestGateway({ capsules: { alpha: sim.url }, config: { heartbeatMs: 15_000 } });
  return { sim, gw };
};

const follow = (...args: Parameters<typeof followAlpha>) => {
  const f = followAlpha(...args);
  subs.push(f.sub);
  return f;
};

describe('followCapsule (Node)', () => {
  for (const transport of ['sse', 'long-poll'] as const) {
    it(`${transport}: every record once, in order`, async () => {
      const { sim, gw } = await setup();
      const f = follow(gw.baseUrl, transport, runBusy(sim, 4, 40, 1));
      const { records, states } = await f.done;
      await expectExactLog(gw, records);
      expect(states.some((s) => s.state === 'live' && s.transport === transport)).toBe(true);
    });
  }

  it('the same capsule over SSE and over long-poll: deep-equal records (facts and submissions too) and gaps', async () => {
    const { sim, gw } = await setup();
    const busy = runBusy(sim, 2, 20, 1);
    await busy;
    // A submission through the gateway, and a loss fact the capsule causes by restarting its session.
    await gw.core.append('alpha', {
      kind: 'submission',
      protocol: 'murmur',
      owner: null,
      contextId: 'ctx-1',
      messageId: 'msg-1',
      text: 'hello',
      receivedAt: Date.now(),
    });
    await sim.restart();
    const last = runBusy(sim, 1, 10, 1);
    const [sse, poll] = await Promise.all([
      follow(gw.baseUrl, 'sse', last).done,
      follow(gw.baseUrl, 'long-poll', last).done,
    ]);
    const upTo = Math.min(sse.records.at(-1)!.offset, poll.records.at(-1)!.offset);
    const cut = (r: CapsuleRecord[]) => r.filter((x) => x.offset <= upTo);
    expect(cut(sse.records)).toEqual(cut(poll.records));
    expect(sse.gaps).toEqual(poll.gaps);
    await expectExactLog(gw, cut(sse.records));
    const kinds = new Set(sse.records.map((r) => (r.kind === 'fact' ? `fact:${r.fact}` : r.kind)));
    expect(kinds).toContain('submission');
    expect(kinds).toContain('fact:upstream-connected');
    expect(sse.gaps.map((g) => g.reason)).toContain('capsule-restarted');
    expect(
      sse.records.some((r) => r.kind === 'frame' && r.id !== null && typeof r.received_at === 'string'),
    ).toBe(true);
  });

  it('auto through a proxy that kills every connection after 300 ms: nothing lost or repeated', async () => {
    const { sim, gw } = await setup();
    proxy = await startCuttingProxy(gw.baseUrl, { lifetimeMs: 300 });
    const f = follow(proxy.url, 'auto', runBusy(sim, 6, 60, 3));
    const { records, states } = await f.done;
    await expectExactLog(gw, records);
    expect(proxy.kills).toBeGreaterThan(2);
    expect(states.some((s) => s.state === 'fallback')).toBe(true);
  });
});
