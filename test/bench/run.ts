/**
 * `npm run bench`: every benchmark, bounded, medians of several runs, printed as a table. Starts its
 * own redis-server on a free port when one is installed. Figures are noisy on shared machines:
 * compare ratios within one run, not absolutes across runs. `npm run bench -- fanout` runs only the
 * fan-out vs nginx + nchan comparison (fanout.ts). The issue-11 scale figures have selectors too:
 * `idle` (10,000 idle SSE connections), `resume` (resume storm), `capsules` (1,000 idle capsules),
 * `ingest` (ingest into Redis vs raw XADD), `reads` (reads vs other conversations), `scale` (all
 * five); several may be given. The default run ends with a summary: figure | target | measured | met?
 */
import { benchIngest } from './ingest.js';
import { benchStoreAppend } from './store-append.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { spawnSync } from 'node:child_process';
import { CLIENT_CORE, killAll, SERVER_CORE } from './fanout-procs.js';
import { printSummary, type Figure } from './scale-summary.js';

const runs = Number(process.env.BENCH_RUNS ?? 5);

/** The issue-11 scale benches (scale-*.ts), each returning its summary rows. */
const SCALE: Record<string, (o: { redis: boolean; redisUrl?: string }) => Promise<Figure[]>> = {
  idle: async (o) => (await import('./scale-idle.js')).benchIdle(o),
  resume: async (o) => (await import('./scale-resume.js')).benchResume(o),
  capsules: async (o) => (await import('./scale-capsules.js')).benchCapsules(o),
  ingest: async (o) => (await import('./scale-ingest.js')).benchIngestRedis({ redisUrl: o.redisUrl, runs }),
  reads: async (o) => (await import('./scale-reads.js')).benchReads(o),
};

/** Run the named scale benches; a bench that throws is a row saying so, not the end of the run. */
const runScale = async (names: string[], redisUrl: string | undefined): Promise<Figure[]> => {
  const figures: Figure[] = [];
  // This process reads and relays on the clients' core; core 0 is the gateway's and redis-server's.
  spawnSync('taskset', ['-p', '-c', String(CLIENT_CORE), String(process.pid)], { stdio: 'ignore' });
  for (const name of names) {
    try {
      figures.push(
        ...(await SCALE[name]!({ redis: redisServerAvailable(), ...(redisUrl ? { redisUrl } : {}) })),
      );
    } catch (err) {
      console.warn(`${name}: ${(err as Error).message}`);
      figures.push({ figure: name, target: '–', measured: `failed: ${(err as Error).message}`, met: null });
    } finally {
      await killAll();
    }
  }
  spawnSync('taskset', ['-p', '-c', `${SERVER_CORE},${CLIENT_CORE}`, String(process.pid)], {
    stdio: 'ignore',
  });
  return figures;
};

const main = async (): Promise<void> => {
  const args = process.argv.slice(2);
  if (args.includes('fanout')) {
    const { benchFanout } = await import('./fanout.js');
    return benchFanout(runs);
  }
  const picked = args.flatMap((a) => (a === 'scale' ? Object.keys(SCALE) : a in SCALE ? [a] : []));
  if (picked.length > 0) {
    const redis = picked.includes('ingest') && redisServerAvailable() ? await startRedisServer() : null;
    try {
      printSummary(await runScale(picked, redis?.url));
    } finally {
      await redis?.stop('SIGTERM');
    }
    return;
  }
  const redis = redisServerAvailable() ? await startRedisServer() : null;
  if (!redis) console.warn('redis-server not installed: Redis figures are skipped');
  const redisUrl = redis?.url;
  try {
    console.log(`\n# store append (LogWriter → store), median of ${runs} runs`);
    const append = await benchStoreAppend({ ...(redisUrl ? { redisUrl } : {}), frames: 100_000, runs });
    console.table(append);

    console.log(`\n# ingest (simulated burst → watch → reconcile → durable append), median of ${runs} runs`);
    const ingest = await benchIngest({ ...(redisUrl ? { redisUrl } : {}), chunks: 100_000, runs });
    console.table(ingest);
    const { benchIngestRedis } = await import('./scale-ingest.js');
    const figures = await benchIngestRedis({ redisUrl, runs, known: { ingest, append } });

    console.log(
      '\n# id-0 frames lost to 12 connection cuts 0.3–0.7 s apart (busy capsule, default reconnect)',
    );
    const { benchIdZeroCuts } = await import('./id-zero-cuts.js');
    console.table([await benchIdZeroCuts()]);

    // fanout.ts: native fan-out against the nginx + nchan + Redis anchor (processes on separate cores).
    for (const extra of ['./fanout.js', './hub-fanout.js']) {
      const mod = (await import(extra).catch(() => null)) as {
        runBench?: (o: { redisUrl?: string; runs: number }) => Promise<void>;
      } | null;
      if (mod?.runBench) await mod.runBench({ ...(redisUrl ? { redisUrl } : {}), runs });
    }

    figures.push(...(await runScale(['idle', 'resume', 'capsules', 'reads'], redisUrl)));
    printSummary(figures);
  } finally {
    await redis?.stop('SIGTERM');
  }
};

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
