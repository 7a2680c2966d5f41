/**
 * The follow bench (fanout-follow.ts) counts what its keyed clients read from a real `GET /v1/follow`:
 * the gateway's own framing, each data line opening with the stream's key, is what lets them count
 * every stream of a connection apart. Here the bench's publisher writes to three simulated capsules
 * behind an in-process gateway (embedded store) and the C and Node clients, keyed, must count every
 * event of every stream once over one connection, as over a connection per stream. A change of
 * `/v1/follow`'s framing that the clients would misread fails the first case.
 */
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { startFanoutClient } from './fanout-client-proc.js';
import { streamName } from './fanout-event.js';
import { delivery, parseFollowLoad } from './fanout-follow.js';
import type { FanoutSample } from './fanout-measure.js';
import { ask, forkPinned, stopProcess } from './fanout-procs.js';

const STREAMS = 3;
const COUNT = 30;
const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));

const children: ChildProcess[] = [];
let gateway: TestGateway | null = null;

afterEach(async () => {
  for (const c of children) if (c.connected) c.send({ type: 'stop' });
  await Promise.all(children.splice(0).map((c) => stopProcess(c, 2000)));
  await gateway?.close();
  gateway = null;
});

interface Report {
  delivered: number;
  seen: number;
  repeated: number;
  ended: number;
}

/** The publisher's capsules behind a gateway, every one watched. */
const rig = async (): Promise<{ publisher: ChildProcess; base: string }> => {
  const publisher = forkPinned(0, here('./fanout-publisher.ts'));
  children.push(publisher);
  const { urls } = await ask<{ urls: string[] }>(publisher, { type: 'capsule', streams: STREAMS }, 'ready');
  gateway = await startTestGateway({
    capsules: Object.fromEntries(urls.map((u, i) => [streamName(i), u])),
  });
  await ask(publisher, { type: 'watched' }, 'watched', 20_000);
  return { publisher, base: gateway.baseUrl };
};

const followUrl = (base: string): string =>
  `${base}/v1/follow?${Array.from({ length: STREAMS }, (_, i) => `stream=murmur:${streamName(i)}@now`).join('&')}`;

/** Reports until `want` events are delivered (bounded: the publisher wrote them all already). */
const settled = async (child: ChildProcess, want: number): Promise<Report> => {
  for (let i = 0; i < 200; i++) {
    const r = await ask<Report>(child, { type: 'report' }, 'report');
    if (r.delivered >= want) return r;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return ask<Report>(child, { type: 'report' }, 'report');
};

describe('the follow bench', () => {
  it("reads /v1/follow's framing: each data line opens with its stream's key", async () => {
    const { publisher, base } = await rig();
    const res = await fetch(followUrl(base));
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await ask(publisher, { type: 'run', rate: 1000, count: 1, marks: [] }, 'done');
    let text = '';
    while (!text.includes('@1@')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    expect(text).toMatch(
      /\nid: v2\.[A-Za-z0-9_.-]+\ndata: \{"stream":"murmur:f0","cursor":"\d+","event":"record","data":\{[^\n]*@1@/,
    );
  });

  it('counts every event of every stream once over one connection, C and Node clients alike', async () => {
    const { publisher, base } = await rig();
    const subs = 4;
    const c = startFanoutClient(0);
    const node = forkPinned(0, here('./fanout-clients.ts'));
    const separate = startFanoutClient(0);
    children.push(c, node, separate);
    const start = { type: 'start', from: 1, to: COUNT, keyed: true };
    await Promise.all([
      ask(c, { ...start, urls: [followUrl(base)], subs }, 'ready', 20_000),
      ask(node, { ...start, urls: [followUrl(base)], subs }, 'ready', 20_000),
      ask(
        separate,
        {
          ...start,
          urls: Array.from({ length: STREAMS }, (_, i) => `${base}/murmur/${streamName(i)}/events`),
          subs: subs * STREAMS,
        },
        'ready',
        20_000,
      ),
    ]);
    await ask(publisher, { type: 'run', rate: 500, count: COUNT, marks: [] }, 'done');
    const want = subs * COUNT;
    const [fromC, fromNode, fromSeparate] = await Promise.all([
      settled(c, want),
      settled(node, want),
      settled(separate, want),
    ]);
    const every = { delivered: want, seen: want, repeated: 0, ended: 0 };
    const counts = (r: Report): Report => ({
      delivered: r.delivered,
      seen: r.seen,
      repeated: r.repeated,
      ended: r.ended,
    });
    expect(counts(fromC)).toEqual(every);
    expect(counts(fromNode)).toEqual(every);
    expect(counts(fromSeparate)).toEqual(every);
  });

  it('reads its load as CLIENTSxSTREAMSxRATE and refuses anything else', () => {
    expect(parseFollowLoad(undefined)).toEqual({ clients: 1000, streams: 10, rate: 4 });
    expect(parseFollowLoad('20x3x7')).toEqual({ clients: 20, streams: 3, rate: 7 });
    expect(() => parseFollowLoad('1000x10')).toThrow(
      'BENCH_FOLLOW_LOAD must be CLIENTSxSTREAMSxRATE, not 1000x10',
    );
    expect(() => parseFollowLoad('10x256x1')).toThrow('BENCH_FOLLOW_LOAD: 1 to 255 streams');
  });

  it('tells a lost or repeated event from clients left behind on a saturated core', () => {
    const run = (over: Partial<FanoutSample>): FanoutSample =>
      ({
        delivered: 100,
        expected: 100,
        repeated: 0,
        clientCore: 0.5,
        clientCpu: 0.3,
        serverCore: 0.6,
        ...over,
      }) as FanoutSample;
    expect(delivery(run({}))).toBe('once');
    expect(delivery(run({ repeated: 1 }))).toBe('repeated');
    expect(delivery(run({ delivered: 99 }))).toBe('short');
    expect(delivery(run({ delivered: 0, serverCore: 1 }))).toBe('behind');
    expect(delivery(run({ delivered: 0, clientCore: 0.95 }))).toBe('behind');
  });
});
