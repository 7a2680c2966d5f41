/**
 * One measured run of the fan-out benches (fanout.ts, fanout-surfaces.ts): start the server (nginx +
 * nchan, or the gateway watching the publisher's capsule) on the server core, the publisher and the
 * subscriber processes on the client core, publish at a fixed rate, and over a steady window after a
 * warm-up read the server's CPU (process + redis-server, /proc utime+stime), the cores' loads and the
 * subscribers' latency histogram. `prepare` lets a bench create what its subscribers read (Flue and
 * BeeOS conversations) and name a URL per subscriber. `streams` (the follow bench) publishes to
 * several capsules or nchan channels at once, `server` starts the servers with several workers or on
 * other cores, `clientCores` moves the publisher and subscribers (the 2-worker bench spreads all of
 * them over both cores).
 */
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { BUCKETS, percentile } from './fanout-event.js';
import {
  ask,
  CLIENT_CORE,
  coreLoad,
  coreTicks,
  cpuUs,
  cpuUsByProcess,
  forkPinned,
  rssBytes,
  SERVER_CORE,
  stopProcess,
} from './fanout-procs.js';
import { startGateway, startNchan, type Server, type ServerOptions } from './fanout-servers.js';
import { streamName } from './fanout-event.js';
import { startFanoutClient } from './fanout-client-proc.js';
import { num } from './bench-env.js';

export type Target = 'anchor' | 'embedded' | 'redis';

export interface FanoutSample {
  usPerEvent: number;
  p50Ms: number;
  p99Ms: number;
  rssMb: number;
  /** Core loads over the window (every process on the core, the bench's and anyone else's). */
  clientCore: number;
  serverCore: number;
  /** The bench's own processes' CPU over the window, in cores: server side, client side. */
  serverCpu: number;
  /** Of serverCpu, redis-server's share (0 without Redis): where a store-side saving shows. */
  redisCpu: number;
  clientCpu: number;
  deliveredRatio: number;
  /** Events in the window counted at the subscribers, and how many there should be. */
  delivered: number;
  expected: number;
  /** Keyed subscribers: events at or below their stream's highest seq (a redelivery or reordering). */
  repeated: number;
  /** Body bytes the subscribers read per event seen (framing and ids included). */
  bytesPerEvent: number;
  /** Subscriber connections the server ended during the run. */
  ended: number;
  /**
   * Each server process's CPU over the window, in cores, in tree order: nginx's master and workers
   * or the gateway's process (its node:cluster primary and workers), then redis-server.
   */
  serverProcs: number[];
}

/** What the publisher reports at the end: how far it fell behind, and POSTs pending or failed (nchan). */
interface Published {
  maxBehind: number;
  inFlight: number;
  failed: number;
}

export interface MeasureSpec {
  target: Target;
  subs: number;
  /** Chunks published per second (the capsule's total). */
  rate: number;
  /** Events each subscriber should receive per published chunk (1; 1/N over N conversations). */
  share?: number;
  /** The rate that sets the warm-up (warmMsAt), when not `rate`: one per subscriber for the surfaces. */
  warmRate?: number;
  /** The warm-up in ms, when not warmMsAt's (a short run's). */
  warmMs?: number;
  windowMs: number;
  clientProcs: number;
  /** Capsule options for the publisher (`queue` when conversations are created first). */
  acceptance?: 'queue';
  /** Once the server watches the capsule: the URL of each subscriber (default: all on server.subUrl). */
  prepare?: (server: Server, publisher: ChildProcess) => Promise<string[]>;
  /** Streams published to (capsules or nchan channels streamName(0…)), seq N on (N - 1) % streams. */
  streams?: number;
  /** Subscribers reading several streams per connection (fanout-client.c's `start-keyed`). */
  keyed?: boolean;
  /** Workers and cores of the server (default: one process on SERVER_CORE). */
  server?: ServerOptions;
  /** Where the publisher and the subscriber processes run (default CLIENT_CORE). */
  clientCores?: number | string;
  label: string;
}

const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
const PUBLISHER = here('./fanout-publisher.ts');
/**
 * Load before the window opens: BENCH_WARM_SECONDS, else 2 s. The overload runs' (overload.ts); the
 * fan-out runs' only when the variable is set (warmMsAt).
 */
export const WARM_MS = num('BENCH_WARM_SECONDS', 2) * 1000;
const WARM_FIXED = Boolean(process.env.BENCH_WARM_SECONDS);
const WARM_EVENTS = 5000;
/**
 * Load before the window opens at `rate` events/s. V8 tiers code up by how often it runs, not by
 * time, and the code run once per published event (the watch, the append and its Redis round trip,
 * the hub's wake) runs `rate` times a second: 2 s into a 500 ev/s run it was still being compiled
 * (perf, Redis store: compiler samples 224/s in the 2nd second, 19-46/s up to the 8th, 8-13/s in
 * the next three, 2-6/s from the 12th; ioredis's share fell from ~85 to ~57 samples/s by the 11th),
 * so a 2 s warm-up measured the JIT as much as the gateway. The window opens after WARM_EVENTS
 * published events, at least 2 s and at most 10 s in; BENCH_WARM_SECONDS fixes it instead. nginx
 * has nothing to warm: the anchor gets the same warm-up and its figures do not move with it.
 * (Earlier, with 12 s instead of 2 s, the BeeOS and Flue figures came out ~8 % lower and native's
 * did not move: the surfaces' three runs of a load share one warm-up, set by the chunk rate of one
 * subscriber.)
 */
export const warmMsAt = (rate: number): number =>
  WARM_FIXED ? WARM_MS : Math.round(Math.min(10_000, Math.max(2000, (WARM_EVENTS / rate) * 1000)));

/** How the warm-up is chosen, for the tables' headers. */
export const warmLabel = (): string =>
  WARM_FIXED
    ? `${WARM_MS / 1000} s warm-up`
    : `a warm-up of ${WARM_EVENTS.toLocaleString('en')} published events (2-10 s)`;
const TAIL_MS = 1000;

/** What the subscriber processes report (fanout-client.c, fanout-clients.ts), summed. */
interface ClientReport {
  delivered: number;
  hist: number[];
  ended: number;
  seen: number;
  repeated?: number;
  bytes?: number;
}

/**
 * Poll the subscribers until every expected event has arrived, or their count has stopped moving for
 * a second (bounded: 10 s): the window's last events land. Clients far behind (a busy machine) are
 * still reading when the publisher stops, so a count that has not moved yet is not the end.
 */
export const drain = async (clients: ChildProcess[], expected = Infinity): Promise<ClientReport> => {
  let last = -1;
  let still = performance.now();
  const deadline = Date.now() + 10_000;
  for (;;) {
    const reports = await Promise.all(clients.map((c) => ask<ClientReport>(c, { type: 'report' }, 'report')));
    const delivered = reports.reduce((a, r) => a + r.delivered, 0);
    if (delivered !== last) still = performance.now();
    if (delivered >= expected || performance.now() - still >= 1000 || Date.now() > deadline) {
      const hist = new Array<number>(BUCKETS).fill(0);
      for (const r of reports) r.hist.forEach((n, i) => (hist[i]! += n));
      const sum = (k: 'ended' | 'seen' | 'repeated' | 'bytes'): number =>
        reports.reduce((a, r) => a + (r[k] ?? 0), 0);
      return {
        delivered,
        hist,
        ended: sum('ended'),
        seen: sum('seen'),
        repeated: sum('repeated'),
        bytes: sum('bytes'),
      };
    }
    last = delivered;
    await new Promise((r) => setTimeout(r, 250));
  }
};

/** `total` split as evenly as possible over `n` parts. */
const part = (total: number, n: number, i: number): number => Math.floor(total / n) + (i < total % n ? 1 : 0);

export const measure = async (spec: MeasureSpec): Promise<FanoutSample> => {
  const { target, subs, rate, windowMs, clientProcs } = spec;
  const warmMs = spec.warmMs ?? warmMsAt(spec.warmRate ?? rate);
  const from = Math.floor((warmMs * rate) / 1000) + 1;
  const to = Math.floor(((warmMs + windowMs) * rate) / 1000);
  const count = Math.floor(((warmMs + windowMs + TAIL_MS) * rate) / 1000);
  const expected = (to - from + 1) * subs * (spec.share ?? 1);
  const clientCores = spec.clientCores ?? CLIENT_CORE;
  const streams = spec.streams;
  const publisher = forkPinned(clientCores, PUBLISHER);
  const clients: ChildProcess[] = [];
  let server: Server | null = null;
  try {
    if (target === 'anchor') {
      server = await startNchan(spec.server);
      await ask(publisher, { type: 'nchan', url: server.pubUrl, streams }, 'ready');
    } else {
      const { url, urls } = await ask<{ url: string; urls: string[] }>(
        publisher,
        { type: 'capsule', streams, ...(spec.acceptance ? { acceptance: spec.acceptance } : {}) },
        'ready',
      );
      server = await startGateway(url, target === 'redis', {
        ...spec.server,
        ...(streams ? { capsules: urls.map((u, i) => ({ id: streamName(i), url: u })) } : {}),
      });
      await ask(publisher, { type: 'watched' }, 'watched', 30_000);
    }
    const urls = spec.prepare ? await spec.prepare(server, publisher) : [server.subUrl];
    const procs = Math.max(1, Math.min(clientProcs, subs));
    let next = 0;
    for (let i = 0; i < procs; i++) clients.push(startFanoutClient(clientCores));
    await Promise.all(
      clients.map((c, i) => {
        const n = part(subs, procs, i);
        const mine = Array.from({ length: n }, (_, k) => urls[(next + k) % urls.length]!);
        next += n;
        const keyed = spec.keyed === true;
        return ask(c, { type: 'start', urls: mine, subs: n, from, to, keyed }, 'ready', 120_000);
      }),
    );

    const pids = server.pids;
    let published: Published | null = null;
    const clientPids = [publisher, ...clients].map((c) => c.pid!);
    const marks: {
      at: number;
      cpu: number;
      byProcess: Map<number, number>;
      redisCpu: number;
      clientCpu: number;
      client: ReturnType<typeof coreTicks>;
      server: ReturnType<typeof coreTicks>;
    }[] = [];
    let rss = 0;
    const rssTimer = setInterval(() => {
      if (marks.length === 1) rss = Math.max(rss, rssBytes(pids));
    }, 200);
    const onMark = (m: { type: string }): void => {
      if (m.type !== 'mark') return;
      marks.push({
        at: performance.now(),
        cpu: cpuUs(pids),
        byProcess: cpuUsByProcess(pids),
        redisCpu: cpuUs(pids.slice(1)),
        clientCpu: cpuUs(clientPids),
        client: coreTicks(CLIENT_CORE),
        server: coreTicks(SERVER_CORE),
      });
      if (marks.length === 1) rss = rssBytes(pids);
    };
    publisher.on('message', onMark);
    try {
      published = await ask<Published>(
        publisher,
        { type: 'run', rate, count, marks: [from, to] },
        'done',
        warmMs + windowMs + TAIL_MS + 30_000,
      );
    } finally {
      clearInterval(rssTimer);
      publisher.off('message', onMark);
    }
    const { delivered, hist, ended, seen, repeated = 0, bytes = 0 } = await drain(clients, expected);
    if (delivered < 0.5 * expected) {
      console.warn(
        `${spec.label}: delivered ${delivered} of ${Math.round(expected)} in the window ` +
          `(${seen} events seen in all; publisher ${JSON.stringify(published)})`,
      );
    }
    const [a, b] = marks as [(typeof marks)[0], (typeof marks)[0]];
    // The whole latency distribution of this run (where p99 comes from: a shifted body or a tail)
    // and its CPU figure (the tables show medians).
    if (process.env.BENCH_FANOUT_PERCENTILES === '1')
      console.log(
        `${spec.label}: ` +
          [50, 90, 95, 98, 99, 99.5, 99.9, 100]
            .map((q) => `p${q} ${percentile(hist, q).toFixed(2)}`)
            .join(', ') +
          ` ms; ${delivered > 0 ? ((b.cpu - a.cpu) / delivered).toFixed(2) : '–'} µs/ev (redis-server ` +
          `${(((b.redisCpu - a.redisCpu) / 1000 / (b.at - a.at)) * 100).toFixed(1)} % of a core)`,
      );
    return {
      usPerEvent: delivered > 0 ? (b.cpu - a.cpu) / delivered : NaN,
      p50Ms: percentile(hist, 50),
      p99Ms: percentile(hist, 99),
      rssMb: rss / 1e6,
      clientCore: coreLoad(a.client, b.client),
      serverCore: coreLoad(a.server, b.server),
      serverCpu: (b.cpu - a.cpu) / 1000 / (b.at - a.at),
      redisCpu: (b.redisCpu - a.redisCpu) / 1000 / (b.at - a.at),
      clientCpu: (b.clientCpu - a.clientCpu) / 1000 / (b.at - a.at),
      deliveredRatio: delivered / expected,
      delivered,
      expected,
      repeated,
      bytesPerEvent: seen > 0 ? bytes / seen : NaN,
      ended,
      serverProcs: [...b.byProcess].map(
        ([pid, us]) => (us - (a.byProcess.get(pid) ?? 0)) / 1000 / (b.at - a.at),
      ),
    };
  } finally {
    for (const c of [...clients, publisher]) if (c.connected) c.send({ type: 'stop' });
    await Promise.all([...clients, publisher].map((c) => stopProcess(c, 2000)));
    await server?.stop();
  }
};

export const median = (xs: number[]): number => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export const medianSample = (samples: FanoutSample[]): FanoutSample => ({
  usPerEvent: median(samples.map((s) => s.usPerEvent)),
  p50Ms: median(samples.map((s) => s.p50Ms)),
  p99Ms: median(samples.map((s) => s.p99Ms)),
  rssMb: median(samples.map((s) => s.rssMb)),
  clientCore: median(samples.map((s) => s.clientCore)),
  serverCore: median(samples.map((s) => s.serverCore)),
  serverCpu: median(samples.map((s) => s.serverCpu)),
  redisCpu: median(samples.map((s) => s.redisCpu)),
  clientCpu: median(samples.map((s) => s.clientCpu)),
  deliveredRatio: median(samples.map((s) => s.deliveredRatio)),
  delivered: median(samples.map((s) => s.delivered)),
  expected: median(samples.map((s) => s.expected)),
  // Any run's repeat is worth seeing: the largest, not the median.
  repeated: Math.max(0, ...samples.map((s) => s.repeated)),
  bytesPerEvent: median(samples.map((s) => s.bytesPerEvent)),
  ended: median(samples.map((s) => s.ended)),
  serverProcs: (samples[0]?.serverProcs ?? []).map((_, i) =>
    median(samples.map((s) => s.serverProcs[i] ?? NaN)),
  ),
});

/**
 * Why a sample cannot be a headline, or null: clients that set the pace (their core, or the bench's
 * client processes, near 100 %), a saturated server core, or a short delivery.
 */
export const flagged = (s: FanoutSample): string | null => {
  const why: string[] = [];
  if (s.clientCore >= 0.9 || s.clientCpu >= 0.9)
    why.push(`clients saturated (core ${Math.round(s.clientCore * 100)} %)`);
  if (s.serverCore >= 0.95) why.push(`server core ${Math.round(s.serverCore * 100)} %`);
  if (!(s.deliveredRatio >= 0.99)) why.push(`delivered ${Math.round(s.deliveredRatio * 100)} %`);
  return why.length > 0 ? why.join(', ') : null;
};

/** Display helpers shared by the fan-out tables. */
export const fmt = (x: number, digits = 1): string => (Number.isFinite(x) ? x.toFixed(digits) : '–');
export const fmtMs = (x: number): string =>
  Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x.toPrecision(2)) : '–';
