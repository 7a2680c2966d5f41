/**
 * Ingest into Redis against its own ceiling: the gateway's ingest figures (ingest.ts:
 * capsule process → watch → reconcile → durable append; store-append.ts: LogWriter → store) beside
 * raw pipelined `XADD` of the same kind of payload (an encoded ~200-byte text frame record, field
 * `r` as the store writes it) with ioredis on the same redis-server, in the same run. Targets:
 * ≥ 50,000 frames/s per capsule end to end, and ≥ 0.5× the raw XADD rate. Every process (this one,
 * the capsule simulator, redis-server) floats on both cores for both paths (run.ts leaves this bench
 * unpinned): this process runs the gateway's ingest path, and pinned to the clients' core it shared
 * that core with the capsule (a third busy process a deployment runs elsewhere) while raw XADD's
 * client had a core to itself.
 *
 * `npm run bench -- ingest`. Env: BENCH_XADD_FRAMES (100000), BENCH_XADD_PIPELINE (1000).
 */
import { Redis } from 'ioredis';
import { encodeEntry, type FrameEntry } from '../../src/log/record.js';
import { benchIngest, type IngestResult } from './ingest.js';
import { median } from './scale-gateway.js';
import { benchStoreAppend, type StoreAppendResult } from './store-append.js';
import type { Figure } from './scale-summary.js';
import { num } from './bench-env.js';

/** The record store-append.ts appends, encoded as the store encodes it. */
const payload = (i: number): string =>
  encodeEntry({
    kind: 'frame',
    event: 'text',
    upstreamId: String(i),
    data: JSON.stringify({ task_id: 't-1', attempt: 1, seq: i, text: `chunk ${i} of a long answer…` }),
    receivedAt: Date.now(),
  } satisfies FrameEntry);

/**
 * Raw XADD of `frames` payloads in pipelines of `depth`, frames/s: sequential pipelines (one in
 * flight) and all pipelines sent at once; the faster is the anchor (the stricter comparison).
 */
const rawXadd = async (
  redisUrl: string,
  frames: number,
  depth: number,
  runs: number,
): Promise<{ sequential: number; concurrent: number }> => {
  const redis = new Redis(redisUrl, { lazyConnect: true, enableAutoPipelining: false });
  await redis.connect();
  const payloads = Array.from({ length: frames }, (_, i) => payload(i));
  const pipelines = (key: string): ReturnType<Redis['pipeline']>[] => {
    const out: ReturnType<Redis['pipeline']>[] = [];
    for (let i = 0; i < frames; i += depth) {
      const p = redis.pipeline();
      for (let k = i; k < Math.min(frames, i + depth); k++) p.xadd(key, '*', 'r', payloads[k]!);
      out.push(p);
    }
    return out;
  };
  const once = async (key: string, concurrent: boolean): Promise<number> => {
    const t0 = performance.now();
    if (concurrent) await Promise.all(pipelines(key).map((p) => p.exec()));
    else for (const p of pipelines(key)) await p.exec();
    const rate = frames / ((performance.now() - t0) / 1000);
    await redis.del(key);
    return rate;
  };
  try {
    await once('mgbench:xadd:warm', true);
    const seq: number[] = [];
    const all: number[] = [];
    for (let r = 0; r < runs; r++) {
      seq.push(await once(`mgbench:xadd:s${r}`, false));
      all.push(await once(`mgbench:xadd:c${r}`, true));
    }
    return { sequential: median(seq), concurrent: median(all) };
  } finally {
    redis.disconnect();
  }
};

/**
 * The ingest figures; `known` reuses the default bench's ingest and store-append rows (same run)
 * instead of measuring them twice.
 */
export const benchIngestRedis = async (opts: {
  redisUrl: string | undefined;
  runs: number;
  known?: { ingest: IngestResult[]; append: StoreAppendResult[] };
}): Promise<Figure[]> => {
  const frames = num('BENCH_XADD_FRAMES', 100_000);
  const depth = num('BENCH_XADD_PIPELINE', 1000);
  console.log(
    `\n# ingest into Redis vs raw pipelined XADD (anchor: the faster raw way) (${frames.toLocaleString('en')} ~200-byte records, pipelines of ${depth}), median of ${opts.runs} runs`,
  );
  if (!opts.redisUrl) {
    console.log('skipped: redis-server is not installed');
    return [
      {
        figure: 'ingest into Redis',
        target: '≥ 50,000 frames/s',
        measured: 'skipped (no redis-server)',
        met: null,
      },
    ];
  }
  const ingest =
    opts.known?.ingest ?? (await benchIngest({ redisUrl: opts.redisUrl, chunks: frames, runs: opts.runs }));
  const append =
    opts.known?.append ??
    (await benchStoreAppend({ redisUrl: opts.redisUrl, frames: frames, runs: opts.runs }));
  const xadd = await rawXadd(opts.redisUrl, frames, depth, opts.runs);
  const raw = Math.max(xadd.sequential, xadd.concurrent);
  const e2e = ingest.find((r) => r.store === 'redis')?.framesPerSec ?? NaN;
  const writer = append.find((r) => r.store === 'redis')?.framesPerSec ?? NaN;
  const fps = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en') : '–');
  console.table([
    {
      path: 'raw XADD, pipelines one at a time',
      'frames/s': fps(xadd.sequential),
      '× raw': (xadd.sequential / raw).toFixed(2),
    },
    {
      path: 'raw XADD, all pipelines in flight',
      'frames/s': fps(xadd.concurrent),
      '× raw': (xadd.concurrent / raw).toFixed(2),
    },
    {
      path: 'LogWriter → RedisStore (append.lua)',
      'frames/s': fps(writer),
      '× raw': (writer / raw).toFixed(2),
    },
    { path: 'capsule → watch → reconcile → Redis', 'frames/s': fps(e2e), '× raw': (e2e / raw).toFixed(2) },
  ]);
  return [
    {
      figure: 'ingest per capsule into Redis (capsule → log, end to end)',
      target: '≥ 50,000 frames/s',
      measured: `${fps(e2e)} frames/s`,
      met: e2e >= 50_000,
    },
    {
      figure: 'ingest into Redis / raw pipelined XADD (same run)',
      target: '≥ 0.5×',
      measured: `${(e2e / raw).toFixed(2)}× end to end, ${(writer / raw).toFixed(2)}× writer (raw ${fps(raw)}/s)`,
      met: e2e / raw >= 0.5,
    },
  ];
};
