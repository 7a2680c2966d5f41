/**
 * Reads scale with what is read: one capsule's log holding N conversations × 50 turns
 * (half Flue, half BeeOS; scale-reads-log.ts), and the latency of one conversation's read over
 * HTTP, a Flue `GET ?view=history` and a BeeOS `GET …/conversations/{id}/messages`, for a log of 10
 * vs 1,000 conversations. The read conversation is the same size in both (50 turns); only the
 * others' grow. Target: latency independent of the others (ratio ≈ 1). Median of several reads
 * after one warm-up read (which also builds the surfaces' per-capsule indexes).
 * Gateway and redis-server on core 0, this process on core 1.
 *
 * Then the same question one level down, without HTTP or projection: GatewayCore.readContext's path
 * (scale-reads-core.ts), the per-context index the surfaces read through.
 *
 * Then a BeeOS task's read beside 40,000 records of a task of unknown context and of other contexts
 * (scale-reads-unattributed.ts).
 *
 * `npm run bench -- reads`. Env: BENCH_READS_CONVERSATIONS (`10,1000`), BENCH_READS_TURNS (50),
 * BENCH_READS_RUNS (21), BENCH_READS_UNATTRIBUTED (40000 records), BENCH_READS_ONLY (`http`, `core`
 * or `unattributed`: one of the parts).
 */
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import { MB, median, startBenchGateway, startBenchRedis, until } from './scale-gateway.js';
import { rssBytes } from './fanout-procs.js';
import { beeosTemplate, flueTemplate, writeConversations, type Conversation } from './scale-reads-log.js';
import { createBeeosConversation, createFlueConversation } from './scale-setup.js';
import type { Figure } from './scale-summary.js';
import { benchCoreReads } from './scale-reads-core.js';
import { benchUnattributedReads } from './scale-reads-unattributed.js';
import { num } from './bench-env.js';

interface ReadRow {
  conversations: number;
  records: number;
  flueMs: number;
  beeosMs: number;
  flueBytes: number;
  beeosBytes: number;
  rssMb: number;
}

/** Bytes of the last answer per URL: the read conversation is the same size whatever N is. */
const answered = new Map<string, number>();

const timed = async (url: string, timeoutMs: number): Promise<number> => {
  const t0 = performance.now();
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${body.slice(0, 200)}`);
  answered.set(url, body.length);
  if (process.env.BENCH_READS_DUMP) console.log(url, body.slice(0, 3000));
  return performance.now() - t0;
};

const readUrls = (base: string, capsule: string, convs: Conversation[]): { flue: string; beeos: string } => {
  const flue = convs.find((c) => c.surface === 'flue')!;
  const beeos = convs.find((c) => c.surface === 'beeos')!;
  return {
    flue: `${base}/flue/${capsule}/${flue.id}?view=history`,
    beeos: `${base}/api/v1/agents/${capsule}/conversations/${beeos.id}/messages`,
  };
};

export const benchReads = async (opts: { redis: boolean }): Promise<Figure[]> => {
  const sizes = (process.env.BENCH_READS_CONVERSATIONS ?? '10,1000')
    .split(',')
    .map(Number)
    .filter((n) => n >= 2);
  const turns = num('BENCH_READS_TURNS', 50);
  // 21, not 5: a read takes 3-18 ms here, and the median of 5 BeeOS reads at 1,000 conversations
  // spread 1.2-2.8x over eight runs at two commits; medians of 21 gave 1.1-1.3x. Costs about a second.
  const runs = num('BENCH_READS_RUNS', 21);
  console.log(
    `\n# reads: one conversation's read (${turns} turns) in a log of N conversations × ${turns} turns ` +
      `(half Flue, half BeeOS) on Redis; median of ${runs} reads; target: independent of N`,
  );
  if (!opts.redis) {
    console.log('skipped: redis-server is not installed');
    return [
      {
        figure: 'reads vs other conversations',
        target: 'independent',
        measured: 'skipped (no redis-server)',
        met: null,
      },
    ];
  }
  const only = process.env.BENCH_READS_ONLY;
  const sim = await startSimulator({ heartbeatMs: 15_000 });
  const redis = await startBenchRedis();
  const rows: ReadRow[] = [];
  const core: Figure[] = [];
  try {
    if (only === 'unattributed' || only === undefined) {
      console.log(`unattributed: one BeeOS task's read beside records of other tasks and contexts`);
      const records = num('BENCH_READS_UNATTRIBUTED', 40_000);
      core.push(...(await benchUnattributedReads({ redisUrl: redis.url, sim, runs, records })));
      if (only === 'unattributed') return core;
    }
    if (only !== 'http') {
      console.log(`core: GatewayCore.readContext of one conversation, in process, no HTTP`);
      core.push(...(await benchCoreReads({ redisUrl: redis.url, sizes, turns, runs })));
    }
    if (only === 'core') return core;
    const capsules = [{ id: 'tpl', url: sim.url }, ...sizes.map((n) => ({ id: `r${n}`, url: sim.url }))];
    const gw = await startBenchGateway(
      { capsules, store: { retention: { maxRecords: 0, maxAgeMs: 0 } } },
      redis.url,
    );
    try {
      const base = gw.baseUrl;
      await until(async () => sim.watchers >= capsules.length, 30_000, 'the gateway watching the capsule');
      // The template: one real turn per surface, through the gateway, answered by the capsule.
      await createFlueConversation(base, 'tpl', 'tpl-flue');
      const beeosConv = await createBeeosConversation(base, 'tpl');
      await sim.idle();
      const store = new RedisStore(redis.url);
      let log: Awaited<ReturnType<RedisStore['read']>>['records'] = [];
      try {
        const done = (): number =>
          log.filter((r) => r.kind === 'frame' && r.event === 'status' && r.data.includes('"final":true'))
            .length;
        await until(
          async () => {
            log = (await store.read('tpl', 0, 10_000)).records;
            return done() >= 2;
          },
          30_000,
          'both template turns in the log',
        );
      } finally {
        await store.close();
      }
      const templates = {
        flue: flueTemplate(log, 'tpl-flue'),
        beeos: beeosTemplate(log, beeosConv),
        flueConv: 'tpl-flue',
        beeosConv,
      };
      console.log(
        `template turn: Flue ${templates.flue.turn.length} records, BeeOS ${templates.beeos.turn.length} ` +
          `(+${templates.beeos.open.length} to open)`,
      );
      for (const n of sizes) {
        const capsule = `r${n}`;
        const t0 = performance.now();
        const { conversations, records } = await writeConversations(redis.url, capsule, templates, n, turns);
        const writeS = (performance.now() - t0) / 1000;
        console.log(
          `${n} conversations: ${records.toLocaleString('en')} records written in ${writeS.toFixed(1)} s`,
        );
        const urls = readUrls(base, capsule, conversations);
        // Warm-up: JIT, and the per-capsule indexes the surfaces build on first use.
        await timed(urls.flue, 300_000);
        await timed(urls.beeos, 300_000);
        const flue: number[] = [];
        const beeos: number[] = [];
        for (let r = 0; r < runs; r++) {
          flue.push(await timed(urls.flue, 120_000));
          beeos.push(await timed(urls.beeos, 120_000));
        }
        rows.push({
          conversations: n,
          records,
          flueMs: median(flue),
          beeosMs: median(beeos),
          flueBytes: answered.get(urls.flue) ?? 0,
          beeosBytes: answered.get(urls.beeos) ?? 0,
          rssMb: rssBytes([gw.pid]) / MB,
        });
      }
    } finally {
      await gw.stop();
    }
  } finally {
    await redis.stop();
    await sim.stop();
  }
  const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toPrecision(2));
  console.table(
    rows.map((r) => ({
      conversations: r.conversations,
      'log records': r.records.toLocaleString('en'),
      'Flue history ms': ms(r.flueMs),
      'BeeOS messages ms': ms(r.beeosMs),
      'answer bytes (Flue, BeeOS)': `${r.flueBytes}, ${r.beeosBytes}`,
      'gateway RSS MB': r.rssMb.toFixed(0),
    })),
  );
  if (rows.length < 2) return core;
  const [small, big] = [rows[0]!, rows[rows.length - 1]!];
  const ratio = (a: number, b: number): number => b / a;
  // "Independent" read as: within 2× (reads of one conversation are a few ms; noise on a shared box).
  const http = (['flue', 'beeos'] as const).map((s) => {
    const a = s === 'flue' ? small.flueMs : small.beeosMs;
    const b = s === 'flue' ? big.flueMs : big.beeosMs;
    return {
      figure: `${s === 'flue' ? 'Flue history' : 'BeeOS messages'} read, ${big.conversations} vs ${small.conversations} other conversations`,
      target: 'independent (≤ 2×)',
      measured: `${ms(b)} ms vs ${ms(a)} ms (${ratio(a, b).toFixed(1)}×)`,
      met: ratio(a, b) <= 2,
    };
  });
  return [...http, ...core];
};
