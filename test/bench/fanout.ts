/**
 * Native fan-out against the nginx + nchan + Redis anchor (issue 11), measured in one run on two
 * cores: every server process (nginx or the gateway, and its redis-server) pinned to core 0; the
 * publisher and several subscriber processes pinned to core 1. Per load (subscribers × events/s,
 * ~200-byte events) and per target, over a steady window after a warm-up: server CPU per delivered
 * event (process + redis-server, /proc utime+stime), p50/p99 publish → receipt latency, peak server
 * RSS, the client core's load (if it nears 100 % the clients, not the server, are being measured)
 * and delivered/expected. Medians of BENCH_RUNS runs, targets interleaved within a run.
 *
 * `npm run bench -- fanout` runs only this; `npx tsx test/bench/fanout.ts` too.
 * Env: BENCH_RUNS (default 5 via run.ts, 3 standalone), BENCH_FANOUT_SECONDS (window, default 5),
 * BENCH_FANOUT_LOADS (e.g. `1000x40,100x500`; default the issue's three plus the 1000x1000 overload),
 * BENCH_FANOUT_TARGETS (`anchor,embedded,redis`), BENCH_FANOUT_CLIENTS (subscriber processes, 4).
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BUCKETS, percentile } from './fanout-event.js';
import {
  ask,
  canPin,
  CLIENT_CORE,
  coreLoad,
  coreTicks,
  cpuUs,
  forkPinned,
  haveCommand,
  killAll,
  rssBytes,
  SERVER_CORE,
  stopProcess,
} from './fanout-procs.js';
import { nchanMissing, startGateway, startNchan, type Server } from './fanout-servers.js';

type Target = 'anchor' | 'embedded' | 'redis';

interface Load {
  subs: number;
  rate: number;
  /** Past what one core can deliver: reported apart, never as a headline. */
  overload: boolean;
}

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
  clientCpu: number;
  deliveredRatio: number;
  /** Subscriber connections the server ended during the run. */
  ended: number;
}

/** What the publisher reports at the end: how far it fell behind, and POSTs pending or failed (nchan). */
interface Published {
  maxBehind: number;
  inFlight: number;
  failed: number;
}

const here = (f: string): string => fileURLToPath(new URL(f, import.meta.url));
const CLIENTS = here('./fanout-clients.ts');
const PUBLISHER = here('./fanout-publisher.ts');
const WARM_MS = 2000;
const TAIL_MS = 1000;

const env = (name: string, dflt: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : dflt;
};

const parseLoads = (spec: string | undefined): Load[] =>
  (spec ?? '1000x40,1000x100,100x500,1000x1000!')
    .split(',')
    .map((s) => /^(\d+)x(\d+)(!?)$/.exec(s.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({
      subs: Number(m[1]),
      rate: Number(m[2]),
      overload: m[3] === '!' || Number(m[1]) * Number(m[2]) >= 500_000,
    }));

/** Poll the subscribers until their count stops moving (bounded): the window's last events land. */
const drain = async (
  clients: ChildProcess[],
): Promise<{ delivered: number; hist: number[]; ended: number; seen: number }> => {
  let last = -1;
  const deadline = Date.now() + 5000;
  for (;;) {
    const reports = await Promise.all(
      clients.map((c) =>
        ask<{ delivered: number; hist: number[]; ended: number; seen: number }>(
          c,
          { type: 'report' },
          'report',
        ),
      ),
    );
    const delivered = reports.reduce((a, r) => a + r.delivered, 0);
    if (delivered === last || Date.now() > deadline) {
      const hist = new Array<number>(BUCKETS).fill(0);
      for (const r of reports) r.hist.forEach((n, i) => (hist[i]! += n));
      const sum = (k: 'ended' | 'seen'): number => reports.reduce((a, r) => a + r[k], 0);
      return { delivered, hist, ended: sum('ended'), seen: sum('seen') };
    }
    last = delivered;
    await new Promise((r) => setTimeout(r, 300));
  }
};

const measure = async (
  target: Target,
  load: Load,
  windowMs: number,
  clientProcs: number,
): Promise<FanoutSample> => {
  const { subs, rate } = load;
  const from = Math.floor((WARM_MS * rate) / 1000) + 1;
  const to = Math.floor(((WARM_MS + windowMs) * rate) / 1000);
  const count = Math.floor(((WARM_MS + windowMs + TAIL_MS) * rate) / 1000);
  const publisher = forkPinned(CLIENT_CORE, PUBLISHER);
  const clients: ChildProcess[] = [];
  let server: Server | null = null;
  try {
    if (target === 'anchor') {
      server = await startNchan();
      await ask(publisher, { type: 'nchan', url: server.pubUrl }, 'ready');
    } else {
      const { url } = await ask<{ url: string }>(publisher, { type: 'capsule' }, 'ready');
      server = await startGateway(url, target === 'redis');
      await ask(publisher, { type: 'watched' }, 'watched', 30_000);
    }
    const procs = Math.max(1, Math.min(clientProcs, subs));
    for (let i = 0; i < procs; i++) clients.push(forkPinned(CLIENT_CORE, CLIENTS));
    await Promise.all(
      clients.map((c, i) =>
        ask(
          c,
          {
            type: 'start',
            url: server!.subUrl,
            subs: Math.floor(subs / procs) + (i < subs % procs ? 1 : 0),
            from,
            to,
          },
          'ready',
        ),
      ),
    );

    const pids = server.pids;
    let published: Published | null = null;
    const clientPids = [publisher, ...clients].map((c) => c.pid!);
    const marks: {
      at: number;
      cpu: number;
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
        WARM_MS + windowMs + TAIL_MS + 30_000,
      );
    } finally {
      clearInterval(rssTimer);
      publisher.off('message', onMark);
    }
    const { delivered, hist, ended, seen } = await drain(clients);
    if (delivered < 0.5 * (to - from + 1) * subs) {
      console.warn(
        `${loadName(load)} ${target}: delivered ${delivered} of ${(to - from + 1) * subs} in the window ` +
          `(${seen} events seen in all; publisher ${JSON.stringify(published)})`,
      );
    }
    const [a, b] = marks as [(typeof marks)[0], (typeof marks)[0]];
    return {
      usPerEvent: delivered > 0 ? (b.cpu - a.cpu) / delivered : NaN,
      p50Ms: percentile(hist, 50),
      p99Ms: percentile(hist, 99),
      rssMb: rss / 1e6,
      clientCore: coreLoad(a.client, b.client),
      serverCore: coreLoad(a.server, b.server),
      serverCpu: (b.cpu - a.cpu) / 1000 / (b.at - a.at),
      clientCpu: (b.clientCpu - a.clientCpu) / 1000 / (b.at - a.at),
      deliveredRatio: delivered / ((to - from + 1) * subs),
      ended,
    };
  } finally {
    for (const c of [...clients, publisher]) if (c.connected) c.send({ type: 'stop' });
    await Promise.all([...clients, publisher].map((c) => stopProcess(c, 2000)));
    await server?.stop();
  }
};

const median = (xs: number[]): number => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const medianSample = (samples: FanoutSample[]): FanoutSample => ({
  usPerEvent: median(samples.map((s) => s.usPerEvent)),
  p50Ms: median(samples.map((s) => s.p50Ms)),
  p99Ms: median(samples.map((s) => s.p99Ms)),
  rssMb: median(samples.map((s) => s.rssMb)),
  clientCore: median(samples.map((s) => s.clientCore)),
  serverCore: median(samples.map((s) => s.serverCore)),
  serverCpu: median(samples.map((s) => s.serverCpu)),
  clientCpu: median(samples.map((s) => s.clientCpu)),
  deliveredRatio: median(samples.map((s) => s.deliveredRatio)),
  ended: median(samples.map((s) => s.ended)),
});

const f = (x: number, digits = 1): string => (Number.isFinite(x) ? x.toFixed(digits) : '–');
const ms = (x: number): string => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x.toPrecision(2)) : '–');
/** A short delivery (nchan throttling its publisher, a gateway shedding) is shown beside the figures. */
const cell = (s: FanoutSample | undefined): string =>
  s
    ? `${f(s.usPerEvent)} µs, ${ms(s.p99Ms)} ms${s.deliveredRatio < 0.99 ? ` (delivered ${f(s.deliveredRatio * 100, 0)} %)` : ''}`
    : '–';
const ratio = (g: FanoutSample | undefined, a: FanoutSample | undefined): string =>
  g && a ? `${f(g.usPerEvent / a.usPerEvent, 2)}×, ${f(g.p99Ms / a.p99Ms, 2)}×` : '–';
const loadName = (l: Load): string =>
  `${l.subs.toLocaleString('en')} × ${l.rate}${l.overload ? ' (overload)' : ''}`;

export const benchFanout = async (runs: number): Promise<void> => {
  if (!canPin()) {
    console.log('\n# fan-out vs nchan: skipped (needs Linux /proc and taskset to pin server and clients)');
    return;
  }
  const windowMs = env('BENCH_FANOUT_SECONDS', 5) * 1000;
  const clientProcs = env('BENCH_FANOUT_CLIENTS', 4);
  const loads = parseLoads(process.env.BENCH_FANOUT_LOADS);
  const redis = haveCommand('redis-server');
  const missing = !redis ? 'redis-server is not installed' : nchanMissing();
  if (missing) console.log(`\nanchor skipped: ${missing}; gateway figures alone`);
  const wanted = (process.env.BENCH_FANOUT_TARGETS ?? 'anchor,embedded,redis').split(',');
  const targets = (['anchor', 'embedded', 'redis'] as const).filter(
    (t) => wanted.includes(t) && (t === 'embedded' || redis) && (t !== 'anchor' || !missing),
  );
  console.log(
    `\n# fan-out vs nginx + nchan + Redis: server (process + redis-server) on core ${SERVER_CORE}, ` +
      `publisher + ${clientProcs} subscriber processes on core ${CLIENT_CORE}; ~200-byte events; ` +
      `${windowMs / 1000} s window after ${WARM_MS / 1000} s warm-up; median of ${runs} runs`,
  );
  // This process only relays IPC; keep it off the server core too.
  spawnSync('taskset', ['-p', '-c', String(CLIENT_CORE), String(process.pid)], { stdio: 'ignore' });
  const results = new Map<string, FanoutSample>();
  const detail: Record<string, string | number>[] = [];
  try {
    for (const load of loads) {
      const samples = new Map<Target, FanoutSample[]>(targets.map((t) => [t, []]));
      for (let r = 0; r < runs; r++) {
        for (const t of targets) {
          try {
            samples.get(t)!.push(await measure(t, load, windowMs, clientProcs));
          } catch (err) {
            console.warn(`${loadName(load)} ${t} run ${r + 1}: ${(err as Error).message}`);
          }
        }
      }
      for (const t of targets) {
        const got = samples.get(t)!;
        if (got.length === 0) continue;
        const m = medianSample(got);
        results.set(`${loadName(load)}/${t}`, m);
        detail.push({
          load: loadName(load),
          target: t,
          'µs/ev': f(m.usPerEvent, 2),
          'p50 ms': ms(m.p50Ms),
          'p99 ms': ms(m.p99Ms),
          'server RSS MB': f(m.rssMb, 0),
          'server procs CPU': `${f(m.serverCpu * 100, 0)} %`,
          'client procs CPU': `${f(m.clientCpu * 100, 0)} %`,
          'core 0 / core 1 load': `${f(m.serverCore * 100, 0)} / ${f(m.clientCore * 100, 0)} %`,
          'delivered/expected': f(m.deliveredRatio, 3),
          'subs ended': m.ended,
        });
      }
    }
  } finally {
    await killAll();
    spawnSync('taskset', ['-p', '-c', `${SERVER_CORE},${CLIENT_CORE}`, String(process.pid)], {
      stdio: 'ignore',
    });
  }
  const row = (l: Load): Record<string, string> => {
    const get = (t: Target): FanoutSample | undefined => results.get(`${loadName(l)}/${t}`);
    return {
      load: loadName(l),
      'anchor: µs/ev, p99': cell(get('anchor')),
      'gateway (embedded): µs/ev, p99': cell(get('embedded')),
      'gateway (Redis): µs/ev, p99': cell(get('redis')),
      'gateway/anchor embedded (CPU, p99)': ratio(get('embedded'), get('anchor')),
      'gateway/anchor Redis (CPU, p99)': ratio(get('redis'), get('anchor')),
    };
  };
  console.log(
    'target: gateway/anchor ≤ 1× in CPU per delivered event and in p99 at the three ordinary loads',
  );
  console.table(loads.filter((l) => !l.overload).map(row));
  if (loads.some((l) => l.overload)) {
    console.log('overload (not a headline: past one core; figures show boundedness, not cost)');
    console.table(loads.filter((l) => l.overload).map(row));
  }
  console.log(
    "details (server = process + its redis-server; procs CPU = the bench's own processes, core load = " +
      'everything on the core: client procs near 100 % means the clients, not the server, set the pace)',
  );
  console.table(detail);
};

/** The entry `npm run bench` (test/bench/run.ts) calls. */
export const runBench = async (o: { runs: number }): Promise<void> => benchFanout(o.runs);

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchFanout(env('BENCH_RUNS', 3)).then(
    () => process.exit(0),
    async (err: unknown) => {
      console.error(err);
      await killAll();
      process.exit(1);
    },
  );
}
