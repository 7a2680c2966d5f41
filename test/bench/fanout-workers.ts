/**
 * Fan-out on every core (`npm run bench -- fanout-workers`): the load where nchan saturates one core
 * (1,000 subscribers × 100 events/s, ~200-byte events: fanout.ts's 1,000 × 100 row), the gateway
 * started with `--workers 2` (node:cluster; Redis, which workers need) beside nginx + nchan with
 * `worker_processes 2`, each with its redis-server, in one run, targets interleaved. CPU per
 * delivered event (every server process: nginx's master and workers or the gateway's primary and
 * workers, and redis-server), p50/p99 publish → receipt, peak server RSS, each server process's CPU
 * (so a worker left idle shows), delivered/expected. Medians of the runs.
 *
 * On a 2-core machine nothing can be kept apart: servers, publisher and the 4 subscriber processes
 * (fanout-client.c) all run on both cores, so the clients' CPU is stated as a share of the machine
 * beside the figures. What such a machine can judge: the two servers' cost per event under the same
 * sharing, and that both workers of each serve. What it cannot: how either scales with cores (there
 * is no core left to grow into), or a p99 free of the clients' own scheduling.
 *
 * Env: BENCH_WORKERS_RUNS (3; BENCH_FANOUT_RUNS when only that is set), BENCH_WORKERS_LOAD
 * (`SUBSxRATE`, default `1000x100`), BENCH_WORKERS (2), BENCH_WORKERS_SECONDS (window, 5),
 * BENCH_FANOUT_CLIENTS (subscriber processes, 4), BENCH_SHORT=1 (a quick look: 3 s window, 3 s
 * warm-up, 2 runs). The warm-up otherwise is fanout-measure.ts's (BENCH_WARM_SECONDS).
 */
import { cpus, loadavg } from 'node:os';
import { num } from './bench-env.js';
import { writeBenchJson } from './bench-json.js';
import { fanoutClientKind } from './fanout-client-proc.js';
import {
  fmt as f,
  fmtMs as ms,
  measure,
  medianSample,
  warmLabel,
  type FanoutSample,
  type Target,
} from './fanout-measure.js';
import { canPin, haveCommand, killAll } from './fanout-procs.js';
import { nchanMissing } from './fanout-servers.js';
import { runAlone } from './run-alone.js';
import type { Figure } from './scale-summary.js';

const SHORT = process.env.BENCH_SHORT === '1';

/** Every core this machine has, as a taskset list: servers and clients alike run on all of them. */
const ALL_CORES = cpus()
  .map((_, i) => i)
  .join(',');

export const parseWorkersLoad = (spec: string | undefined): { subs: number; rate: number } => {
  const m = /^(\d+)x(\d+)$/.exec((spec ?? '1000x100').trim());
  if (!m) throw new Error(`BENCH_WORKERS_LOAD must be SUBSxRATE, not ${spec}`);
  return { subs: Number(m[1]), rate: Number(m[2]) };
};

/** The machine's load over the window: both cores' mean (the samples keep core 0 and core 1). */
const machine = (s: FanoutSample): number => (s.serverCore + s.clientCore) / 2;
/** The bench's clients (publisher + subscriber processes) as a share of the whole machine. */
const clientShare = (s: FanoutSample): number => s.clientCpu / cpus().length;

/** Why a sample cannot be judged: a saturated machine, or a short delivery. */
const flaggedSpread = (s: FanoutSample): string | null => {
  const why: string[] = [];
  if (machine(s) >= 0.95) why.push(`machine ${Math.round(machine(s) * 100)} % busy`);
  if (!(s.deliveredRatio >= 0.99)) why.push(`delivered ${Math.round(s.deliveredRatio * 100)} %`);
  return why.length > 0 ? why.join(', ') : null;
};

const procs = (s: FanoutSample): string => s.serverProcs.map((c) => f(c * 100, 0)).join(' + ') + ' %';

export const benchWorkers = async (runs: number): Promise<Figure[]> => {
  const { subs, rate } = parseWorkersLoad(process.env.BENCH_WORKERS_LOAD);
  const workers = num('BENCH_WORKERS', 2);
  const name = `fan-out ${subs.toLocaleString('en')} × ${rate}, ${workers} workers`;
  const redis = haveCommand('redis-server');
  if (!canPin() || !redis) {
    const why = !redis ? 'redis-server is not installed' : 'no taskset';
    console.log(`\n# ${name}: skipped (${why})`);
    return [{ figure: name, target: '–', measured: `skipped (${why})`, met: null }];
  }
  const startLoad = loadavg();
  const missing = nchanMissing();
  if (missing) console.log(`\nanchor skipped: ${missing}; gateway figures alone`);
  const targets: Target[] = missing ? ['redis'] : ['anchor', 'redis'];
  const windowMs = (SHORT ? 3 : num('BENCH_WORKERS_SECONDS', 5)) * 1000;
  const clientProcs = num('BENCH_FANOUT_CLIENTS', 4);
  console.log(
    `\n# ${name}: gateway --workers ${workers} (Redis) vs nginx + nchan worker_processes ${workers} ` +
      `(Redis); servers, publisher and ${clientProcs} ${fanoutClientKind()} processes all on cores ` +
      `${ALL_CORES}; ~200-byte events; ${windowMs / 1000} s window after ` +
      `${SHORT ? '3 s warm-up' : warmLabel()}; median of ${runs} runs`,
  );
  const samples = new Map<Target, FanoutSample[]>(targets.map((t) => [t, []]));
  try {
    for (let r = 0; r < runs; r++) {
      for (const t of targets) {
        try {
          samples.get(t)!.push(
            await measure({
              target: t,
              subs,
              rate,
              windowMs,
              clientProcs,
              server: { workers, cores: ALL_CORES },
              clientCores: ALL_CORES,
              ...(SHORT ? { warmMs: 3000 } : {}),
              label: `${name} ${t} run ${r + 1}`,
            }),
          );
        } catch (err) {
          console.warn(`${name} ${t} run ${r + 1}: ${(err as Error).message}`);
        }
      }
    }
  } finally {
    await killAll();
  }
  const med = new Map<Target, FanoutSample>();
  for (const [t, got] of samples) if (got.length > 0) med.set(t, medianSample(got));
  console.log(
    'target: gateway ≤ 1× nchan in CPU per delivered event and ≤ 1.25× in p99 (issue 51); ' +
      "server procs: each process's CPU (nginx: master + workers; gateway: primary + workers; then redis-server)",
  );
  console.table(
    targets.map((t) => {
      const m = med.get(t);
      return {
        target: t === 'anchor' ? `nchan, worker_processes ${workers}` : `gateway --workers ${workers}`,
        'µs/ev': m ? f(m.usPerEvent, 2) : '–',
        'p50 ms': m ? ms(m.p50Ms) : '–',
        'p99 ms': m ? ms(m.p99Ms) : '–',
        'server RSS MB': m ? f(m.rssMb, 0) : '–',
        'server CPU (cores)': m ? f(m.serverCpu, 2) : '–',
        'server procs': m ? procs(m) : '–',
        'clients CPU (cores)': m ? f(m.clientCpu, 2) : '–',
        "clients' share of the machine": m ? `${f(clientShare(m) * 100, 0)} %` : '–',
        'machine load (core 0 / 1)': m
          ? `${f(machine(m) * 100, 0)} % (${f(m.serverCore * 100, 0)} / ${f(m.clientCore * 100, 0)})`
          : '–',
        'delivered/expected': m ? `${m.delivered} / ${m.expected}` : '–',
        flagged: m ? (flaggedSpread(m) ?? '') : '',
      };
    }),
  );
  const figures = workersFigures(name, workers, med.get('redis'), med.get('anchor'), missing);
  writeBenchJson('fanout-workers', {
    subs,
    rate,
    workers,
    windowMs,
    runs,
    loadAverageAtStart: startLoad,
    samples: Object.fromEntries(samples),
    medians: Object.fromEntries(med),
    figures,
  });
  return figures;
};

const workersFigures = (
  name: string,
  workers: number,
  g: FanoutSample | undefined,
  a: FanoutSample | undefined,
  missing: string | null,
): Figure[] => {
  const figure = `${name}: CPU/delivered event, p99 (Redis; clients on the same cores)`;
  const target = `CPU ≤ 1×, p99 ≤ 1.25× nchan (worker_processes ${workers})`;
  if (!g) return [{ figure, target, measured: 'not measured (failed or skipped)', met: null }];
  const flag = flaggedSpread(g) ?? (a ? flaggedSpread(a) : null);
  const cell = (s: FanoutSample): string =>
    `${f(s.usPerEvent)} µs, ${ms(s.p99Ms)} ms (clients ${f(clientShare(s) * 100, 0)} % of the machine)`;
  return [
    {
      figure,
      target,
      anchor: a ? cell(a) : `none (${missing ?? 'not measured'})`,
      measured:
        cell(g) +
        (a ? ` (${f(g.usPerEvent / a.usPerEvent, 2)}×, ${f(g.p99Ms / a.p99Ms, 2)}×)` : '') +
        (flag ? `; flagged: ${flag}` : ''),
      met: !a || flag ? null : g.usPerEvent <= a.usPerEvent && g.p99Ms <= 1.25 * a.p99Ms,
    },
  ];
};

runAlone(import.meta.url, () =>
  benchWorkers(num('BENCH_WORKERS_RUNS', SHORT ? 2 : num('BENCH_FANOUT_RUNS', 3))),
);
