/**
 * `npm run bench`: the headline figures, bounded, ending with ONE table: figure | target | anchor
 * (same run) | measured | met? (scale-summary.ts), preceded by each bench's own detail table.
 * Starts its own redis-server(s) when installed; nginx + nchan for the fan-out anchor when installed.
 * Figures are noisy on shared machines: compare ratios within one run, not absolutes across runs.
 *
 * Selectors (`npm run bench -- <name> [<name> …]`), each printing its tables and the summary:
 *   fanout     native fan-out vs nginx + nchan + Redis (fanout.ts; its 1000×1000 overload row too)
 *   surfaces   BeeOS and Flue SSE fan-out vs native (fanout-surfaces.ts)
 *   follow     1,000 clients × 10 capsule streams over one /v1/follow connection each vs a
 *              connection per stream vs nchan's multiplexed subscriber (fanout-follow.ts)
 *   fanout-workers  1,000 × 100 fan-out, gateway --workers 2 vs nchan worker_processes 2, servers and
 *              clients on every core (fanout-workers.ts)
 *   overload   1,000 × 1,000 ev/s native with slow readers (overload.ts)
 *   ai-sdk     POST → first text-delta on the AI SDK surface beside message/stream straight to the
 *              capsule (ai-sdk-first-delta.ts)
 *   idle | resume | capsules | ingest | reads, or `scale` for those five (scale-*.ts)
 *   streams    general Durable Streams appends/s and catch-up reads/s, embedded and Redis, beside
 *              the reference server @durable-streams/server (streams.ts)
 *   extras     store append, end-to-end ingest, id-0 cuts, hub fan-out to long-pollers, the write
 *              floor (not a headline figure)
 *   floor      what a socket write costs on this machine, with no gateway in it (write-floor.ts)
 *   latency    hand-off and time to first token per surface beside direct and native (latency.ts);
 *              `--quick` spaces messages 100–200 ms instead of 1–2 s, fewer of them
 *   all        the default run plus `extras`
 * `--check` names what the selectors would run and stops (nothing is measured).
 * The default run (no selector) is every headline figure. Env: BENCH_RUNS (store and ingest runs, 5),
 * BENCH_FANOUT_RUNS (fan-out runs, 3), BENCH_SURFACES_RUNS (surface runs, 5; BENCH_FANOUT_RUNS when
 * only that is set), BENCH_DS_RUNS (Durable Streams runs, 3), BENCH_SHORT=1 (follow and
 * fanout-workers: 3 s windows and warm-ups, 2 runs), and each bench's own (see its header).
 */
import { cpus, loadavg } from 'node:os';
import { spawnSync } from 'node:child_process';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { CLIENT_CORE, killAll, SERVER_CORE } from './fanout-procs.js';
import { failedFigure, printSummary, type Figure } from './scale-summary.js';
import type { IngestResult } from './ingest.js';
import type { StoreAppendResult } from './store-append.js';
import { num } from './bench-env.js';

const runs = num('BENCH_RUNS', 5);
const fanoutRuns = num('BENCH_FANOUT_RUNS', 3);
/**
 * The surfaces' ratio sits near its bound and swings ±0.15 between runs (docs/benchmarks.md):
 * five interleaved runs by default, BENCH_FANOUT_RUNS when only that is set (older commands).
 */
const dsRuns = num('BENCH_DS_RUNS', 3);
const surfaceRuns = num('BENCH_SURFACES_RUNS', process.env.BENCH_FANOUT_RUNS ? fanoutRuns : 5);

interface Ctx {
  redisUrl: string | undefined;
  /** The store-append and ingest rows, once measured (the ingest figures reuse them). */
  known?: { ingest: IngestResult[]; append: StoreAppendResult[] };
}

/**
 * A bench that hands rows to the summary. `unpinned`: this process stays on both cores instead of
 * the clients' one (see ingest).
 */
interface Bench {
  target: string;
  run: (c: Ctx) => Promise<Figure[]>;
  unpinned?: boolean;
}

/** The scale benches (scale-*.ts), each returning its summary rows. */
const SCALE: Record<string, Bench> = {
  idle: {
    target: '≤ 300 MB',
    run: async () => (await import('./scale-idle.js')).benchIdle({ redis: redisServerAvailable() }),
  },
  resume: {
    target: '≤ 5 s',
    run: async () => (await import('./scale-resume.js')).benchResume({ redis: redisServerAvailable() }),
  },
  capsules: {
    target: '≤ 1 MB each',
    run: async () => (await import('./scale-capsules.js')).benchCapsules({ redis: redisServerAvailable() }),
  },
  // Unpinned: here this process runs the gateway's ingest path itself (scale-ingest.ts says why).
  ingest: {
    target: '≥ 50,000 frames/s, ≥ 0.5× XADD',
    unpinned: true,
    run: async (c) =>
      (await import('./scale-ingest.js')).benchIngestRedis({
        redisUrl: c.redisUrl,
        runs,
        ...(c.known ? { known: c.known } : {}),
      }),
  },
  reads: {
    target: 'independent',
    run: async () => (await import('./scale-reads.js')).benchReads({ redis: redisServerAvailable() }),
  },
};

/** Every bench that hands rows to the summary, by selector, in the default run's order. */
const BENCHES: Record<string, Bench> = {
  ingest: SCALE.ingest!,
  fanout: {
    target: '≤ 1× anchor',
    run: async () =>
      (await import('./fanout.js')).benchFanout(fanoutRuns, {
        loads: defaultRun ? '1000x40,1000x100,100x500' : undefined,
      }),
  },
  surfaces: {
    target: '≤ 1.5× native',
    run: async () => (await import('./fanout-surfaces.js')).benchSurfaces(surfaceRuns),
  },
  follow: {
    target: '≤ a connection per stream; ≤ 1× nchan multiplexed',
    run: async () => {
      const { benchFollow, SHORT } = await import('./fanout-follow.js');
      return benchFollow(num('BENCH_FOLLOW_RUNS', SHORT ? 2 : fanoutRuns));
    },
  },
  // Unpinned: servers and clients share every core here (fanout-workers.ts says why).
  'fanout-workers': {
    target: 'CPU ≤ 1×, p99 ≤ 1.25× nchan',
    unpinned: true,
    run: async () =>
      (await import('./fanout-workers.js')).benchWorkers(
        num('BENCH_WORKERS_RUNS', process.env.BENCH_SHORT === '1' ? 2 : fanoutRuns),
      ),
  },
  overload: {
    target: '< 400 MB, p99 < 1 s',
    run: async () => (await import('./overload.js')).benchOverload(),
  },
  'ai-sdk': {
    target: '≤ direct + 25 ms',
    run: async () => (await import('./ai-sdk-first-delta.js')).benchAiSdk(),
  },
  idle: SCALE.idle!,
  resume: SCALE.resume!,
  capsules: SCALE.capsules!,
  reads: SCALE.reads!,
  streams: {
    target: '≥ reference',
    run: async () => (await import('./streams.js')).benchStreams(dsRuns),
  },
  // Unpinned: the gateways, the simulator and the clients all run in this process.
  latency: {
    target: 'hand-off ≤ 25 / 50 ms p95, TTFT ≤ 25 ms above direct',
    unpinned: true,
    run: async (c) =>
      (await import('./latency.js')).benchLatency({
        ...(c.redisUrl ? { redisUrl: c.redisUrl } : {}),
        quick: process.argv.includes('--quick'),
      }),
  },
};

let defaultRun = false;

/** Store append, end-to-end ingest, id-0 cuts, hub fan-out: tables only (ingest rows are reused). */
const extras = async (c: Ctx): Promise<void> => {
  const redisUrl = c.redisUrl;
  const { benchStoreAppend } = await import('./store-append.js');
  const { benchIngest } = await import('./ingest.js');
  console.log(`\n# store append (LogWriter → store), median of ${runs} runs`);
  const append = await benchStoreAppend({ ...(redisUrl ? { redisUrl } : {}), frames: 100_000, runs });
  console.table(append);
  console.log(`\n# ingest (simulated burst → watch → reconcile → durable append), median of ${runs} runs`);
  const ingest = await benchIngest({ ...(redisUrl ? { redisUrl } : {}), chunks: 20_000, runs });
  console.table(ingest);
  c.known = { ingest, append };
  console.log('\n# id-0 frames lost to 12 connection cuts 0.3–0.7 s apart (busy capsule, default reconnect)');
  const { benchIdZeroCuts } = await import('./id-zero-cuts.js');
  console.table([await benchIdZeroCuts()]);
  const { runBench } = await import('./hub-fanout.js');
  await runBench({ ...(redisUrl ? { redisUrl } : {}), runs });
  await (await import('./write-floor.js')).benchWriteFloor();
};

const pinTo = (cores: string): void =>
  void spawnSync('taskset', ['-p', '-c', cores, String(process.pid)], { stdio: 'ignore' });

const header = (args: string[]): string => {
  const env = Object.entries(process.env)
    .filter(([k]) => k.startsWith('BENCH_'))
    .map(([k, v]) => `${k}=${v} `)
    .join('');
  return (
    `command: ${env}npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}\n` +
    `machine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), node ${process.version}, ` +
    `load average at start ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`
  );
};

const main = async (): Promise<void> => {
  // `--check`: say what the selectors would run and stop (the README's commands are tested so).
  const check = process.argv.includes('--check');
  const args = process.argv.slice(2).filter((a) => a !== '--check' && a !== '--quick');
  // The command as given (`--quick` shapes what is measured), for the report's first line.
  const top = header(process.argv.slice(2).filter((a) => a !== '--check'));
  console.log(`# ${top.replace('\n', '\n# ')}`);
  defaultRun = args.length === 0 || args.includes('all');
  const picked = defaultRun
    ? Object.keys(BENCHES)
    : [...new Set(args.flatMap((a) => (a === 'scale' ? Object.keys(SCALE) : a in BENCHES ? [a] : [])))];
  const wantExtras = args.includes('all') || args.includes('extras');
  // The floor alone (extras include it): tables only, nothing for the summary.
  const wantFloor = args.includes('floor') && !wantExtras;
  const unknown = args.filter((a) => !(a in BENCHES) && !['scale', 'all', 'extras', 'floor'].includes(a));
  if (unknown.length > 0) throw new Error(`unknown selector(s): ${unknown.join(', ')}`);
  if (check) {
    const also = [wantExtras ? 'extras' : null, wantFloor ? 'floor' : null].filter((x) => x !== null);
    console.log(`would run: ${[...picked, ...also].join(', ')}`);
    return;
  }

  const needRedis = wantExtras || picked.includes('ingest') || picked.includes('latency');
  const redis = needRedis && redisServerAvailable() ? await startRedisServer() : null;
  if (needRedis && !redis) console.warn('redis-server not installed: Redis figures are skipped');
  const ctx: Ctx = { redisUrl: redis?.url };
  const figures: Figure[] = [];
  const t0 = performance.now();
  try {
    if (wantExtras) await extras(ctx);
    // Its sender and reader pin themselves and are stopped by it.
    if (wantFloor) await (await import('./write-floor.js')).benchWriteFloor();
    for (const name of picked) {
      const started = performance.now();
      // This process reads and relays on the clients' core; core 0 is the servers'.
      if (!BENCHES[name]!.unpinned) pinTo(String(CLIENT_CORE));
      try {
        figures.push(...(await BENCHES[name]!.run(ctx)));
      } catch (err) {
        console.warn(`${name}: ${(err as Error).message}`);
        figures.push(failedFigure(name, BENCHES[name]!.target, err));
      } finally {
        await killAll();
        pinTo(`${SERVER_CORE},${CLIENT_CORE}`);
      }
      console.log(`(${name}: ${((performance.now() - started) / 1000).toFixed(0)} s)`);
    }
  } finally {
    await redis?.stop('SIGTERM');
  }
  printSummary(figures, `${top}\ntotal ${((performance.now() - t0) / 60_000).toFixed(1)} min`);
};

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
