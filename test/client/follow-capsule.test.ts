/**
 * followCapsule in Node (streamed-fetch SSE and long-poll) against a real gateway and simulator:
 * every frame of the log once, in offset order, including across cut connections.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { followCapsule } from '../../src/client/index.js';
import type { CapsuleRecord, FollowState, Subscription } from '../../src/client/index.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { runBusy, type LastFrame } from './busy-capsule.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { loggedFrames } from './log-frames.js';

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

const setup = async (): Promise<{ sim: SimulatedCapsule; gw: TestGateway }> => {
  sim = await startSimulator({ taskAcceptance: 'queue' });
  gw = await startTestGateway({ capsules: { alpha: sim.url }, config: { heartbeatMs: 15_000 } });
  return { sim, gw };
};

/** Follow until the frame `last` arrives; resolves with everything delivered and every state. */
const follow = (
  gateway: string,
  transport: 'auto' | 'sse' | 'long-poll',
  last: Promise<LastFrame>,
): { done: Promise<{ records: CapsuleRecord[]; states: FollowState[] }> } => {
  const records: CapsuleRecord[] = [];
  const states: FollowState[] = [];
  let target: LastFrame | null = null;
  let resolve!: () => void;
  const arrived = new Promise<void>((r) => (resolve = r));
  const check = (): void => {
    const r = records[records.length - 1];
    if (target && r && r.event === target.event && r.data === target.data) resolve();
  };
  void last.then((l) => {
    target = l;
    check();
  });
  sub = followCapsule({
    gateway,
    capsule: 'alpha',
    transport,
    tuning: { backoffMs: 50 },
    onRecord: (r) => {
      records.push(r);
      check();
    },
    onState: (s) => states.push(s),
  });
  return { done: arrived.then(() => ({ records, states })) };
};

const expectExactLog = async (records: CapsuleRecord[]): Promise<void> => {
  const upTo = records[records.length - 1]!.offset;
  const logged = await loggedFrames(gw!.core, 'alpha', upTo);
  expect(records.map((r) => ({ offset: r.offset, event: r.event, data: r.data }))).toEqual(logged);
};

describe('followCapsule (Node)', () => {
  for (const transport of ['sse', 'long-poll'] as const) {
    it(`${transport}: every frame once, in order`, async () => {
      const { sim, gw } = await setup();
      const f = follow(gw.baseUrl, transport, runBusy(sim, 4, 40, 1));
      const { records, states } = await f.done;
      await expectExactLog(records);
      expect(states.some((s) => s.state === 'live' && s.transport === transport)).toBe(true);
      if (transport === 'long-poll')
        expect(records.every((r) => typeof r.received_at === 'string')).toBe(true);
    });
  }

  it('auto through a proxy that kills every connection after 300 ms: nothing lost or repeated', async () => {
    const { sim, gw } = await setup();
    proxy = await startCuttingProxy(gw.baseUrl, { lifetimeMs: 300 });
    const f = follow(proxy.url, 'auto', runBusy(sim, 6, 60, 3));
    const { records, states } = await f.done;
    await expectExactLog(records);
    expect(proxy.kills).toBeGreaterThan(2);
    expect(states.some((s) => s.state === 'fallback')).toBe(true);
  });
});
