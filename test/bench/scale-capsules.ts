/**
 * Scale per replica: 1,000 idle capsules on one gateway process, each a real HTTP SSE
 * door (scale-fake-doors.ts: connection-ack and heartbeats) in a helper process. The figure is the
 * gateway's RSS per capsule once every capsule's watch is open (target ≤ 1 MB): its whole RSS over
 * the capsule count, and the marginal cost against the same gateway fronting one capsule.
 * Gateway (and redis-server) on core 0, doors on core 1.
 *
 * `npm run bench -- capsules`. Env: BENCH_CAPSULES (1000).
 */
import { ask, CLIENT_CORE, rssBytes, stopProcess } from './fanout-procs.js';
import {
  forkRaised,
  MB,
  startBenchGateway,
  startBenchRedis,
  until,
  type BenchRedis,
} from './scale-gateway.js';
import type { Figure } from './scale-summary.js';
import { num } from './bench-env.js';

interface CapsulesResult {
  store: string;
  capsules: number;
  rssOneMb: number;
  rssAllMb: number;
  attachSeconds: number;
}

/** RSS of a gateway fronting `n` doors once all n watches are open (settled). */
const rssWith = async (n: number, store: 'embedded' | 'redis'): Promise<{ rss: number; seconds: number }> => {
  const doors = forkRaised(CLIENT_CORE, new URL('./scale-fake-doors.ts', import.meta.url).pathname);
  let redis: BenchRedis | null = null;
  let gw: Awaited<ReturnType<typeof startBenchGateway>> | null = null;
  try {
    const { url } = await ask<{ url: string }>(doors, { type: 'start' }, 'ready', 30_000);
    if (store === 'redis') redis = await startBenchRedis();
    const capsules = Array.from({ length: n }, (_, i) => ({ id: `c${i}`, url: `${url}/c${i}/` }));
    const t0 = performance.now();
    gw = await startBenchGateway({ capsules }, redis?.url ?? null);
    await until(
      async () => (await ask<{ open: number }>(doors, { type: 'count' }, 'count')).open >= n,
      120_000,
      `${n} capsule watches open`,
    );
    const seconds = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 3000));
    return { rss: rssBytes([gw.pid]), seconds };
  } finally {
    if (doors.connected) doors.send({ type: 'stop' });
    await gw?.stop();
    await stopProcess(doors);
    await redis?.stop();
  }
};

export const benchCapsules = async (opts: { redis: boolean }): Promise<Figure[]> => {
  const n = num('BENCH_CAPSULES', 1000);
  console.log(
    `\n# ${n.toLocaleString('en')} idle capsules on one gateway process (core 0; doors in one process on core 1); ` +
      'target ≤ 1 MB RSS per capsule',
  );
  const rows: CapsulesResult[] = [];
  for (const store of opts.redis ? (['embedded', 'redis'] as const) : (['embedded'] as const)) {
    try {
      const one = await rssWith(1, store);
      const all = await rssWith(n, store);
      rows.push({
        store,
        capsules: n,
        rssOneMb: one.rss / MB,
        rssAllMb: all.rss / MB,
        attachSeconds: all.seconds,
      });
    } catch (err) {
      console.warn(`capsules ${store}: ${(err as Error).message}`);
    }
  }
  const perAll = (r: CapsulesResult): number => r.rssAllMb / r.capsules;
  const marginal = (r: CapsulesResult): number => (r.rssAllMb - r.rssOneMb) / (r.capsules - 1);
  console.table(
    rows.map((r) => ({
      store: r.store,
      capsules: r.capsules,
      'RSS 1 capsule MB': r.rssOneMb.toFixed(0),
      [`RSS ${n} capsules MB`]: r.rssAllMb.toFixed(0),
      'MB/capsule (RSS / n)': perAll(r).toFixed(3),
      'MB/capsule (marginal)': marginal(r).toFixed(3),
      'start → all attached s': r.attachSeconds.toFixed(1),
      target: '≤ 1 MB',
    })),
  );
  return rows.map((r) => ({
    figure: `${n.toLocaleString('en')} idle capsules, RSS per capsule (${r.store})`,
    target: '≤ 1 MB',
    measured: `${perAll(r).toFixed(2)} MB (marginal ${marginal(r).toFixed(2)} MB)`,
    met: perAll(r) <= 1,
  }));
};
