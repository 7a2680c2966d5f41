/**
 * followCapsule's transport rules behind misbehaving HTTP proxies (real loopback proxies, real
 * gateway and simulator), with the client's timing knobs made small so each case takes seconds:
 * - a proxy that buffers text/event-stream (no byte of the stream ever arrives) → long-poll;
 * - SSE probed again after falling back, and kept once it works;
 * - `Retry-After` on a 503 honoured on both transports (timestamps taken by the proxy).
 * Assertions are on behaviour (transport, states, records exact), never on speed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { FollowState, Subscription } from '../../src/client/index.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { runBusy } from './busy-capsule.js';
import { expectExactLog, follow } from './follow-helpers.js';
import { startHttpProxy, type HttpProxy, type ProxiedRequest } from './http-proxies.js';

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let proxy: HttpProxy | null = null;
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

const isStream = (r: ProxiedRequest): boolean => r.path.includes('/records');
const isPoll = (r: ProxiedRequest): boolean => r.path.includes('/poll');

/** Resolves once `pred` holds for the states seen so far (checked on each new state). */
const untilState = (states: FollowState[], pred: (s: FollowState[]) => boolean): Promise<void> =>
  new Promise((resolve) => {
    const tick = (): void => (pred(states) ? resolve() : void setTimeout(tick, 20));
    tick();
  });

describe('followCapsule behind proxies', () => {
  it('a proxy that buffers the stream: no byte in time → long-poll from the same cursor, nothing lost', async () => {
    const { sim, gw } = await setup();
    proxy = await startHttpProxy(gw.baseUrl, { buffer: isStream });
    // probeMs far beyond the test: it stays on long-poll once it left SSE.
    const f = follow(proxy.url, 'auto', runBusy(sim, 3, 30, 2), {
      firstByteMs: 400,
      probeMs: 600_000,
      pollHoldMs: 1_000,
    });
    sub = f.sub;
    const { records, states } = await f.done;
    await expectExactLog(gw, records);
    expect(f.sub.transport).toBe('long-poll');
    const fallback = states.find((s) => s.state === 'fallback');
    expect(fallback).toMatchObject({ transport: 'long-poll', reason: expect.stringMatching(/no byte/) });
    expect(states.some((s) => s.state === 'live' && s.transport === 'sse')).toBe(false);
    expect(proxy.log.filter(isStream)).toHaveLength(1);
    expect(proxy.log.filter(isPoll).length).toBeGreaterThan(0);
  });

  it('probes SSE again after falling back, and stays on SSE once a probe gets through', async () => {
    const { sim, gw } = await setup();
    // The first two streams are buffered (the first connection, then the first probe); later ones pass.
    proxy = await startHttpProxy(gw.baseUrl, {
      buffer: (r, log) => isStream(r) && log.filter(isStream).length <= 2,
    });
    const f = follow(proxy.url, 'auto', new Promise(() => undefined), {
      firstByteMs: 400,
      probeMs: 300,
      pollHoldMs: 500,
    });
    sub = f.sub;
    const { states } = f.seen;
    await untilState(states, (s) => {
      const back = s.findIndex((x) => x.state === 'fallback');
      return back >= 0 && s.slice(back).some((x) => x.state === 'live' && x.transport === 'sse');
    });
    const last = await runBusy(sim, 2, 30, 2);
    await untilState(states, () =>
      f.seen.records.some((r) => r.kind === 'frame' && r.event === last.event && r.data === last.data),
    );
    await expectExactLog(gw, f.seen.records);
    expect(f.sub.transport).toBe('sse');
    // Buffered, fell back; probed, buffered again, fell back; probed again, live on SSE.
    // (Each switch is reported with its reason; polls on the fallback report `fallback` without one.)
    expect(states.filter((s) => s.state === 'fallback' && s.reason)).toHaveLength(2);
    expect(proxy.log.filter(isStream).map((r) => r.buffered)).toEqual([true, true, false]);
    const streams = proxy.log.filter(isStream);
    const pollsBetween = proxy.log.filter((r) => isPoll(r) && r.n > streams[0]!.n && r.n < streams[1]!.n);
    expect(pollsBetween.length).toBeGreaterThan(0);
  });

  for (const transport of ['sse', 'long-poll'] as const) {
    it(`${transport}: a 503 with Retry-After is retried no earlier than it says`, async () => {
      const { sim, gw } = await setup();
      const path = transport === 'sse' ? isStream : isPoll;
      // The first two requests of this transport get 503 + Retry-After: 1 from the proxy.
      proxy = await startHttpProxy(gw.baseUrl, {
        reject: (r, log) => (path(r) && log.filter(path).length <= 2 ? '1' : null),
      });
      // A tiny backoff: without Retry-After the retries would come within milliseconds.
      const f = follow(proxy.url, transport, runBusy(sim, 2, 20, 2), { backoffMs: 10, backoffMaxMs: 20 });
      sub = f.sub;
      const { records } = await f.done;
      await expectExactLog(gw, records);
      const seen = proxy.log.filter(path);
      expect(seen.slice(0, 2).every((r) => r.rejectedAt !== null)).toBe(true);
      expect(seen[2]!.rejectedAt).toBeNull();
      for (const i of [0, 1]) {
        // Proxy clocks only; a timer may fire a few ms early against Date.now(), hence the slack.
        expect(seen[i + 1]!.arrivedAt - seen[i]!.rejectedAt!).toBeGreaterThanOrEqual(1_000 - 15);
      }
    });
  }
});
