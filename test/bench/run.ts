/**
 * `npm run bench`: every benchmark, bounded, medians of several runs, printed as a table. Starts its
 * own redis-server on a free port when one is installed. Figures are noisy on shared machines:
 * compare ratios within one run, not absolutes across runs. `npm run bench -- fanout` runs only the
 * fan-out vs nginx + nchan comparison (fanout.ts).
 */
import { benchIngest } from './ingest.js';
import { benchStoreAppend } from './store-append.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';

const runs = Number(process.env.BENCH_RUNS ?? 5);

const main = async (): Promise<void> => {
  if (process.argv.slice(2).includes('fanout')) {
    const { benchFanout } = await import('./fanout.js');
    return benchFanout(runs);
  }
  const redis = redisServerAvailable() ? await startRedisServer() : null;
  if (!redis) console.warn('redis-server not installed: Redis figures are skipped');
  const redisUrl = redis?.url;
  try {
    console.log(`\n# store append (LogWriter → store), median of ${runs} runs`);
    console.table(await benchStoreAppend({ ...(redisUrl ? { redisUrl } : {}), frames: 100_000, runs }));

    console.log(`\n# ingest (simulated burst → watch → reconcile → durable append), median of ${runs} runs`);
    console.table(await benchIngest({ ...(redisUrl ? { redisUrl } : {}), chunks: 20_000, runs }));

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
