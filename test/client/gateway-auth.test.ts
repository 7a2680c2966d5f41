/**
 * The client's credentials against the real gateway's auth: a Bearer key on long-polls and
 * streamed-fetch SSE; tickets (`POST /auth/tickets`, `?ticket=`) for an EventSource (the `eventsource`
 * package, a WHATWG EventSource, stands in for the browser's); refusals that close the subscription
 * without a retry storm; and a cached ticket that a restarted gateway (new signing key) refuses,
 * replaced by a fresh one with nothing lost. All traffic goes through a logging HTTP proxy.
 */
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import type { FollowState, Subscription } from '../../src/client/index.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { runBusy, type LastFrame } from './busy-capsule.js';
import { follow as followAlpha, type Followed } from './follow-helpers.js';
import { startHttpProxy, type HttpProxy } from './http-proxies.js';
import { loggedRecords } from './log-frames.js';

const KEY = {
  observe: `key-observe-${'a'.repeat(24)}`,
  submitOnly: `key-submit-${'b'.repeat(24)}`,
  wrong: `key-wrong-${'c'.repeat(24)}`,
};

let sim: SimulatedCapsule | null = null;
const gateways: TestGateway[] = [];
let proxy: HttpProxy | null = null;
const subs: Subscription[] = [];
const globals = globalThis as { EventSource?: unknown };

afterEach(async () => {
  for (const s of subs.splice(0)) s.close();
  delete globals.EventSource;
  await proxy?.close();
  for (const g of gateways.splice(0)) await g.close();
  await sim?.stop();
  sim = proxy = null;
});

/** A gateway with keys; `ticketSecret` differs between "restarts" so old tickets are refused. */
const startGateway = async (simUrl: string, ticketSecret: string): Promise<TestGateway> => {
  const gw = await startTestGateway({
    capsules: { alpha: simUrl },
    config: { heartbeatMs: 15_000 },
    extra: {
      auth: {
        apiKeys: [
          { sha256: sha256Hex(KEY.observe), owner: 'operator', scopes: ['observe'] },
          { sha256: sha256Hex(KEY.submitOnly), owner: 'alice', scopes: ['submit'] },
        ],
        ticketSecret,
      },
    },
  });
  gateways.push(gw);
  return gw;
};

const setup = async (): Promise<{ sim: SimulatedCapsule; gw: TestGateway; proxy: HttpProxy }> => {
  sim = await startSimulator({ taskAcceptance: 'queue' });
  const gw = await startGateway(sim.url, 'ticket-secret-one-0123456789');
  proxy = await startHttpProxy(gw.baseUrl, {});
  return { sim, gw, proxy };
};

const follow = (...args: Parameters<typeof followAlpha>) => {
  const f = followAlpha(...args);
  subs.push(f.sub);
  return f;
};

const closedWith = (states: FollowState[]): Promise<string> =>
  new Promise((resolve) => {
    const tick = (): void => {
      const closed = states.find((s) => s.state === 'closed');
      if (closed) resolve(closed.reason ?? '');
      else setTimeout(tick, 20);
    };
    tick();
  });

/** Resolves when the follower has delivered the frame `last`. */
const delivered = (seen: Followed, last: LastFrame): Promise<void> =>
  new Promise((resolve) => {
    const tick = (): void => {
      if (seen.records.some((r) => r.kind === 'frame' && r.event === last.event && r.data === last.data))
        resolve();
      else setTimeout(tick, 20);
    };
    tick();
  });

const streams = (p: HttpProxy) => p.log.filter((r) => r.path.startsWith('/murmur/alpha/records'));
const ticketPosts = (p: HttpProxy) => p.log.filter((r) => r.method === 'POST' && r.path === '/auth/tickets');

describe('followCapsule against the gateway with auth', () => {
  for (const transport of ['sse', 'long-poll'] as const) {
    it(`${transport} with a Bearer key of scope observe: every record once, in order`, async () => {
      const { sim, gw, proxy } = await setup();
      const f = follow(proxy.url, transport, runBusy(sim, 3, 30, 1), {}, { token: KEY.observe });
      const { records } = await f.done;
      expect(records).toEqual(await loggedRecords(gw.core, 'alpha', records.at(-1)!.offset));
      // No ticket on this path: every request carried the header.
      expect(ticketPosts(proxy)).toEqual([]);
    });

    it(`${transport}: a key without observe is closed with 403, a wrong key with 401, each after one request`, async () => {
      const { proxy } = await setup();
      const never = new Promise<LastFrame>(() => undefined);
      const noScope = follow(proxy.url, transport, never, {}, { token: KEY.submitOnly });
      expect(await closedWith(noScope.seen.states)).toMatch(/403/);
      const wrong = follow(proxy.url, transport, never, {}, { token: KEY.wrong });
      expect(await closedWith(wrong.seen.states)).toMatch(/401/);
      // Refusals are final: one request each, no retry.
      expect(proxy.log.map((r) => r.status)).toEqual([403, 401]);
    });
  }

  it('EventSource with tickets: Bearer only on POST /auth/tickets, ?ticket= on the stream, records exact', async () => {
    const { sim, gw, proxy } = await setup();
    globals.EventSource = EventSource;
    const f = follow(
      proxy.url,
      'sse',
      runBusy(sim, 3, 30, 1),
      {},
      { token: KEY.observe, useEventSource: true },
    );
    const { records } = await f.done;
    expect(records).toEqual(await loggedRecords(gw.core, 'alpha', records.at(-1)!.offset));
    expect(ticketPosts(proxy).map((r) => r.status)).toEqual([200]);
    expect(streams(proxy).map((r) => [r.status, /[?&]ticket=t1\./.test(r.path)])).toEqual([[200, true]]);
  });

  it('EventSource with a key without observe: closed with 403 (found out by one poll), not retried', async () => {
    const { proxy } = await setup();
    globals.EventSource = EventSource;
    const f = follow(
      proxy.url,
      'sse',
      new Promise<LastFrame>(() => undefined),
      {},
      {
        token: KEY.submitOnly,
        useEventSource: true,
      },
    );
    expect(await closedWith(f.seen.states)).toMatch(/403/);
    expect(proxy.log.map((r) => `${r.method} ${r.path.split('?')[0]} ${r.status}`)).toEqual([
      'POST /auth/tickets 200',
      'GET /murmur/alpha/records 403',
      'GET /murmur/alpha/poll 403',
    ]);
  });

  for (const via of ['EventSource', 'streamed fetch'] as const) {
    it(`${via}: a restarted gateway with a new signing key refuses the cached ticket once; a fresh one, nothing lost`, async () => {
      const { sim, gw, proxy } = await setup();
      if (via === 'EventSource') globals.EventSource = EventSource;
      let target: LastFrame;
      const f = follow(
        proxy.url,
        'sse',
        new Promise<LastFrame>(() => undefined),
        {},
        {
          token: KEY.observe,
          useEventSource: true,
        },
      );
      target = await runBusy(sim, 2, 20, 1);
      await delivered(f.seen, target);
      // The restart: a new gateway (another ticket key) takes the old one's place behind the proxy,
      // then the old one goes away, ending the stream. The ticket the client holds is good for a
      // minute by its clock, and refused by the new gateway.
      const next = await startGateway(sim.url, 'ticket-secret-two-0123456789');
      proxy.retarget(next.baseUrl);
      await gw.close();
      target = await runBusy(sim, 2, 20, 1);
      await delivered(f.seen, target);

      expect(f.seen.states.some((s) => s.state === 'closed')).toBe(false);
      expect(streams(proxy).filter((r) => r.status === 401)).toHaveLength(1);
      expect(ticketPosts(proxy).map((r) => r.status)).toEqual([200, 200]);
      // Everything the new gateway logged (its offsets are above the old one's), once, in order.
      const records = f.seen.records;
      const newLog = await loggedRecords(next.core, 'alpha', records.at(-1)!.offset);
      const first = newLog[0]!.offset as number;
      expect(records.filter((r) => r.offset >= first)).toEqual(newLog);
    });
  }
});
