/**
 * Ingest-side throughput: frames/s from LogWriter.append to durable in the store (memory and Redis),
 * the median of several runs. The main bench runner (`npm run bench`) imports benchStoreAppend.
 */
import { randomUUID } from 'node:crypto';
import { LogWriter } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { FrameEntry } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { LogStore } from '../../src/log/store.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';

export interface StoreAppendResult {
  store: string;
  framesPerSec: number;
}

/** A frame shaped like a Murmur text chunk (about 200 bytes encoded). */
const textFrame = (i: number): FrameEntry => ({
  kind: 'frame',
  event: 'text',
  upstreamId: String(i),
  data: JSON.stringify({ task_id: 't-1', attempt: 1, seq: i, text: `chunk ${i} of a long answer…` }),
  receivedAt: Date.now(),
});

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** One run: append `frames` in upstream-sized bursts, then wait until all are durable. */
const runOnce = async (store: LogStore, frames: number): Promise<number> => {
  const writer = new LogWriter(store, { maxPendingEntries: frames + 1, trimIntervalMs: 0 });
  const capsule = `bench-${randomUUID().slice(0, 8)}`;
  // Built beforehand: the figure is the writer and the store, not the frame generator.
  const entries = Array.from({ length: frames }, (_, i) => textFrame(i));
  const start = performance.now();
  for (let i = 0; i < frames; i++) {
    void writer.append(capsule, entries[i]!);
    // An upstream chunk carries many frames; yield between chunks as a socket read would.
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
  await writer.flush();
  const seconds = (performance.now() - start) / 1000;
  // Counted from the first offset: a new epoch's offsets start above a time floor (append.lua), not at 1.
  const { head, first } = await store.position(capsule);
  if (head - first + 1 !== frames)
    throw new Error(`bench: expected ${frames} frames durable, found ${head - first + 1}`);
  await writer.close();
  return frames / seconds;
};

const measure = async (name: string, store: LogStore, frames: number, runs: number) => {
  await runOnce(store, Math.min(frames, 5000)); // warm-up (JIT, script load)
  const rates: number[] = [];
  for (let r = 0; r < runs; r++) rates.push(await runOnce(store, frames));
  return { store: name, framesPerSec: Math.round(median(rates)) };
};

/** Median frames/s through LogWriter into each store; Redis uses redisUrl or a throwaway server. */
export async function benchStoreAppend(opts: {
  redisUrl?: string;
  frames: number;
  runs: number;
}): Promise<StoreAppendResult[]> {
  const results: StoreAppendResult[] = [];
  const memory = new MemoryStore();
  results.push(await measure('memory', memory, opts.frames, opts.runs));
  await memory.close();

  let url = opts.redisUrl;
  const server = !url && redisServerAvailable() ? await startRedisServer() : null;
  url ??= server?.url;
  if (url) {
    const redis = new RedisStore(url, { keyPrefix: 'mgbench', retention: { maxRecords: 0, maxAgeMs: 0 } });
    try {
      results.push(await measure('redis', redis, opts.frames, opts.runs));
    } finally {
      await redis.close();
      await server?.stop('SIGTERM');
    }
  }
  return results;
}
