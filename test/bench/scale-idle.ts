/**
 * Scale per replica: 10,000 idle SSE connections on one gateway process, spread over the
 * three surfaces (native `GET /murmur/{c}/events`, BeeOS conversation events, Flue
 * `?view=updates&live=sse&offset=-1`), embedded store and Redis. The figure is the gateway process's
 * RSS with every connection open (target ≤ 300 MB), beside its RSS before and per connection.
 * Gateway (and redis-server) on core 0, client processes on core 1; loopback only.
 *
 * `npm run bench -- idle`. Env: BENCH_IDLE_CONNECTIONS (10000), BENCH_SCALE_CLIENTS (4),
 * BENCH_IDLE_SURFACES (`native,beeos,flue`: one surface alone shows what each connection costs).
 */
import { startSimulator } from '../../src/simulator/index.js';
import { ask, CLIENT_CORE, rssBytes } from './fanout-procs.js';
import { MB, startBenchGateway, startBenchRedis, until, type BenchRedis } from './scale-gateway.js';
import {
  createBeeosConversation,
  createFlueConversation,
  errorSummary,
  share,
  startClients,
  stopClients,
} from './scale-setup.js';
import type { Figure } from './scale-summary.js';
import { num } from './bench-env.js';

interface IdleResult {
  store: string;
  connections: number;
  failed: number;
  rssBeforeMb: number;
  rssOpenMb: number;
  kbPerConnection: number;
  openSeconds: number;
}

const measure = async (
  store: 'embedded' | 'redis',
  connections: number,
  procs: number,
): Promise<IdleResult> => {
  const sim = await startSimulator({ heartbeatMs: 15_000 });
  let redis: BenchRedis | null = null;
  let gw: Awaited<ReturnType<typeof startBenchGateway>> | null = null;
  const clients = await startClients(CLIENT_CORE, procs);
  try {
    if (store === 'redis') redis = await startBenchRedis();
    gw = await startBenchGateway({ capsules: [{ id: 'idle', url: sim.url }] }, redis?.url ?? null);
    const base = gw.baseUrl;
    await until(async () => sim.watchers > 0, 30_000, 'the gateway watching the capsule');
    await createFlueConversation(base, 'idle', 'idle-conv');
    const beeos = await createBeeosConversation(base, 'idle');
    const wanted = (process.env.BENCH_IDLE_SURFACES ?? 'native,beeos,flue').split(',');
    const targets = [
      { surface: 'native', url: `${base}/murmur/idle/events` },
      { surface: 'beeos', url: `${base}/api/v1/agents/idle/conversations/${beeos}/events` },
      { surface: 'flue', url: `${base}/flue/idle/idle-conv?view=updates&live=sse&offset=-1` },
    ].filter((t) => wanted.includes(t.surface));
    if (targets.length === 0) throw new Error('BENCH_IDLE_SURFACES names no surface');
    await new Promise((r) => setTimeout(r, 1000));
    const before = rssBytes([gw.pid]);
    const t0 = performance.now();
    const answers = await Promise.all(
      clients.map((c, i) =>
        ask<{ failed: number; errors: [string, number][] }>(
          c,
          // Rotated per process so each surface gets a third of the connections.
          {
            type: 'open',
            targets: [...targets.slice(i % targets.length), ...targets.slice(0, i % targets.length)],
            count: share(connections, procs, i),
            batch: 100,
            timeoutMs: 60_000,
          },
          'ready',
          300_000,
        ),
      ),
    );
    const openSeconds = (performance.now() - t0) / 1000;
    const failed = answers.reduce((a, r) => a + r.failed, 0);
    if (failed) console.warn(`idle ${store}: ${failed} connections failed (${errorSummary(answers)})`);
    // Settled: whatever each connection allocated on open is resident by now.
    await new Promise((r) => setTimeout(r, 2000));
    const open = rssBytes([gw.pid]);
    const ok = connections - failed;
    return {
      store,
      connections: ok,
      failed,
      rssBeforeMb: before / MB,
      rssOpenMb: open / MB,
      kbPerConnection: ok > 0 ? (open - before) / 1024 / ok : NaN,
      openSeconds,
    };
  } finally {
    await stopClients(clients);
    await gw?.stop();
    await redis?.stop();
    await sim.stop();
  }
};

export const benchIdle = async (opts: { redis: boolean }): Promise<Figure[]> => {
  const connections = num('BENCH_IDLE_CONNECTIONS', 10_000);
  const procs = num('BENCH_SCALE_CLIENTS', 4);
  console.log(
    `\n# ${connections.toLocaleString('en')} idle SSE connections (native, BeeOS, Flue: a third each) on one ` +
      `gateway process (core 0), ${procs} client processes (core 1); target RSS ≤ 300 MB`,
  );
  const rows: IdleResult[] = [];
  for (const store of opts.redis ? (['embedded', 'redis'] as const) : (['embedded'] as const)) {
    try {
      rows.push(await measure(store, connections, procs));
    } catch (err) {
      console.warn(`idle ${store}: ${(err as Error).message}`);
    }
  }
  console.table(
    rows.map((r) => ({
      store: r.store,
      connections: r.connections,
      failed: r.failed,
      'RSS before MB': r.rssBeforeMb.toFixed(0),
      'RSS open MB': r.rssOpenMb.toFixed(0),
      'KB/connection': r.kbPerConnection.toFixed(1),
      'open time s': r.openSeconds.toFixed(1),
      target: '≤ 300 MB',
    })),
  );
  return rows.map((r) => ({
    figure: `${connections.toLocaleString('en')} idle SSE connections, RSS (${r.store})`,
    target: '≤ 300 MB',
    measured: `${r.rssOpenMb.toFixed(0)} MB (${r.kbPerConnection.toFixed(1)} KB/conn${r.failed ? `, ${r.failed} failed` : ''})`,
    met: r.failed === 0 && r.rssOpenMb <= 300,
  }));
};
