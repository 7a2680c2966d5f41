/**
 * The protocol's own client (`@durable-streams/client`) following a busy capsule's stream through a
 * TCP proxy that kills every connection after a second, over `live=long-poll` and `live=sse`: every
 * record once, in offset order, equal to a catch-up read of the whole log.
 */
import { stream, type StreamResponse } from '@durable-streams/client';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { runBusy, type LastFrame } from '../../client/busy-capsule.js';
import { startCuttingProxy, type CuttingProxy } from '../../client/cutting-proxy.js';

interface Message {
  offset: number;
  kind: string;
  event?: string;
  data?: string;
}

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let proxy: CuttingProxy | null = null;
const aborts: AbortController[] = [];
afterEach(async () => {
  for (const a of aborts.splice(0)) a.abort();
  await proxy?.close();
  await gw?.close();
  await sim?.stop();
  sim = gw = proxy = null;
});

/** The whole log by catch-up reads straight from the gateway (bounded: each page moves the offset). */
const catchUpAll = async (base: string): Promise<Message[]> => {
  const all: Message[] = [];
  let offset = '-1';
  for (let page = 0; page < 1000; page++) {
    const res = await fetch(`${base}/v1/stream/murmur/alpha?offset=${offset}`);
    expect(res.status).toBe(200);
    all.push(...((await res.json()) as Message[]));
    if (res.headers.get('stream-up-to-date') === 'true') return all;
    offset = res.headers.get('stream-next-offset')!;
  }
  throw new Error('the log never came up to date');
};

const isFrame = (m: Message, last: LastFrame): boolean =>
  m.kind === 'frame' && m.event === last.event && m.data === last.data;

describe('@durable-streams/client through a proxy that cuts every second', () => {
  for (const live of ['long-poll', 'sse'] as const) {
    it(`live=${live}: every record once, in order, equal to the log`, async () => {
      sim = await startSimulator({ taskAcceptance: 'queue' });
      gw = await startTestGateway({
        capsules: { alpha: sim.url },
        config: { heartbeatMs: 15_000, longPollMaxMs: 2_000 },
      });
      proxy = await startCuttingProxy(gw.baseUrl, { lifetimeMs: 1_000 });
      const urls: string[] = [];
      const abort = new AbortController();
      aborts.push(abort);
      const res: StreamResponse<Message> = await stream<Message>({
        url: `${proxy.url}/v1/stream/murmur/alpha`,
        offset: '-1',
        live,
        json: true,
        signal: abort.signal,
        fetch: (input, init) => {
          urls.push(String(input instanceof Request ? input.url : input));
          return fetch(input, init);
        },
        backoffOptions: { initialDelay: 20, maxDelay: 200, multiplier: 2 },
        // Connections live a second at most here: that is the proxy, not a buffering proxy to fall
        // back from.
        sseResilience: { minConnectionDuration: 0, maxShortConnections: 1_000_000 },
      });

      const seen: Message[] = [];
      let target: LastFrame | null = null;
      let arrived!: () => void;
      const done = new Promise<void>((resolve) => (arrived = resolve));
      const liveRequests = (): number =>
        urls.filter((u) => new URL(u).searchParams.get('live') === live).length;
      const cutEnough = (): boolean => proxy!.kills >= 3 && liveRequests() >= 3;
      // Tasks back to back until the proxy has cut several live connections (at most 40 tasks).
      const work = async (capsule: SimulatedCapsule): Promise<LastFrame> => {
        let last = await runBusy(capsule, 4, 60, 5);
        for (let i = 4; i < 40 && !cutEnough(); i++) last = await runBusy(capsule, 1, 60, 5);
        return last;
      };
      const busy = work(sim).then((last) => {
        target = last;
        if (seen.some((m) => isFrame(m, last))) arrived();
      });
      res.subscribeJson((batch) => {
        for (const m of batch.items) {
          seen.push(m);
          if (target && isFrame(m, target)) arrived();
        }
      });
      await busy;
      await done;
      abort.abort();

      const offsets = seen.map((m) => m.offset);
      expect(new Set(offsets).size).toBe(offsets.length);
      expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
      const log = await catchUpAll(gw.baseUrl);
      expect(seen).toEqual(log.slice(0, seen.length));
      // Cut while following: several live connections, each ended by the proxy.
      expect(cutEnough()).toBe(true);
    }, 60_000);
  }
});
