/**
 * Native fan-out against the nginx + nchan + Redis anchor, measured in one run on two
 * cores: every server process (nginx or the gateway, and its redis-server) pinned to core 0; the
 * publisher and several subscriber processes pinned to core 1. Per load (subscribers × events/s,
 * ~200-byte events) and per target, over a steady window after a warm-up: server CPU per delivered
 * event (process + redis-server, /proc utime+stime), p50/p99 publish → receipt latency, peak server
 * RSS, the client core's load (if it nears 100 % the clients, not the server, are being measured)
 * and delivered/expected. Medians of BENCH_RUNS runs, targets interleaved within a run.
 *
 * `npm run bench -- fanout` runs only this; `npx tsx test/bench/fanout.ts` too. Returns the summary
 * rows of run.ts's table (gateway beside the anchor). Env: BENCH_FANOUT_RUNS or BENCH_RUNS (3),
 * BENCH_FANOUT_SECONDS (window, default 5), BENCH_WARM_SECONDS (load before it; default 5,000 events,
 * 2-10 s: fanout-measure.ts),
 * BENCH_FANOUT_LOADS (e.g. `1000x40,100x500`; default the issue's three plus the 1000x1000 overload),
 * BENCH_FANOUT_TARGETS (`anchor,embedded,redis`), BENCH_FANOUT_CLIENTS (subscriber processes, 4),
 * BENCH_FANOUT_PERCENTILES=1 (print each run's latency percentiles, p50 to the maximum).
 */
import { spawnSync } from 'node:child_process';
import {
  flagged,
  fmt as f,
  fmtMs as ms,
  measure,
  medianSample,
  warmLabel,
  type FanoutSample,
  type Target,
} from './fanout-measure.js';
import { canPin, CLIENT_CORE, haveCommand, killAll, SERVER_CORE } from './fanout-procs.js';
import { nchanMissing } from './fanout-servers.js';
import { runAlone } from './run-alone.js';
import type { Figure } from './scale-summary.js';
import { fanoutClientKind } from './fanout-client-proc.js';

interface Load {
  subs: number;
  rate: number;
  /** Past what one core can deliver: reported apart, never as a headline. */
  overload: boolean;
}

export type { FanoutSample };

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

/** A short delivery (nchan throttling its publisher, a gateway shedding) is shown beside the figures. */
const cell = (s: FanoutSample | undefined): string =>
  s
    ? `${f(s.usPerEvent)} µs, ${ms(s.p99Ms)} ms${s.deliveredRatio < 0.99 ? ` (delivered ${f(s.deliveredRatio * 100, 0)} %)` : ''}`
    : '–';
const ratio = (g: FanoutSample | undefined, a: FanoutSample | undefined): string =>
  g && a ? `${f(g.usPerEvent / a.usPerEvent, 2)}×, ${f(g.p99Ms / a.p99Ms, 2)}×` : '–';
const loadName = (l: Load): string =>
  `${l.subs.toLocaleString('en')} × ${l.rate}${l.overload ? ' (overload)' : ''}`;

/**
 * The summary rows: per ordinary load and store, the gateway's CPU per delivered event and p99 beside
 * the anchor's from the same run; met when both ratios are ≤ 1. A flagged sample (clients setting the
 * pace, a saturated server core, a short delivery) is not judged.
 */
const figures = (loads: Load[], results: Map<string, FanoutSample>, missing: string | null): Figure[] =>
  loads
    .filter((l) => !l.overload)
    .flatMap((l) =>
      (['embedded', 'redis'] as const).map((store): Figure => {
        const g = results.get(`${loadName(l)}/${store}`);
        const a = results.get(`${loadName(l)}/anchor`);
        const figure = `native fan-out ${loadName(l)}: CPU/delivered event, p99 (${store === 'redis' ? 'Redis' : 'embedded'})`;
        const target = '≤ 1× anchor (both)';
        if (!g) return { figure, target, measured: 'not measured (failed or skipped)', met: null };
        const flag = flagged(g) ?? (a ? flagged(a) : null);
        const anchor = a ? cell(a) : `none (${missing ?? 'not measured'})`;
        const measured = `${cell(g)}${a ? ` (${ratio(g, a)})` : ''}${flag ? `; flagged: ${flag}` : ''}`;
        const met = !a || flag ? null : g.usPerEvent <= a.usPerEvent && g.p99Ms <= a.p99Ms;
        return { figure, target, anchor, measured, met };
      }),
    );

export const benchFanout = async (runs: number, opts: { loads?: string } = {}): Promise<Figure[]> => {
  if (!canPin()) {
    console.log('\n# fan-out vs nchan: skipped (needs Linux /proc and taskset to pin server and clients)');
    return [
      {
        figure: 'native fan-out vs nchan',
        target: '≤ 1× anchor',
        measured: 'skipped (no taskset)',
        met: null,
      },
    ];
  }
  const windowMs = env('BENCH_FANOUT_SECONDS', 5) * 1000;
  const clientProcs = env('BENCH_FANOUT_CLIENTS', 4);
  const loads = parseLoads(process.env.BENCH_FANOUT_LOADS ?? opts.loads);
  const redis = haveCommand('redis-server');
  const missing = !redis ? 'redis-server is not installed' : nchanMissing();
  if (missing) console.log(`\nanchor skipped: ${missing}; gateway figures alone`);
  const wanted = (process.env.BENCH_FANOUT_TARGETS ?? 'anchor,embedded,redis').split(',');
  const targets = (['anchor', 'embedded', 'redis'] as const).filter(
    (t) => wanted.includes(t) && (t === 'embedded' || redis) && (t !== 'anchor' || !missing),
  );
  console.log(
    `\n# fan-out vs nginx + nchan + Redis: server (process + redis-server) on core ${SERVER_CORE}, ` +
      `publisher + ${clientProcs} ${fanoutClientKind()} processes on core ${CLIENT_CORE}; ~200-byte events; ` +
      `${windowMs / 1000} s window after ${warmLabel()}; median of ${runs} runs`,
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
            samples.get(t)!.push(
              await measure({
                target: t,
                subs: load.subs,
                rate: load.rate,
                windowMs,
                clientProcs,
                label: `${loadName(load)} ${t}`,
              }),
            );
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
          'of which redis': `${f(m.redisCpu * 100, 0)} %`,
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
  return figures(loads, results, missing);
};

runAlone(import.meta.url, () => benchFanout(env('BENCH_FANOUT_RUNS', env('BENCH_RUNS', 3))));
