/**
 * The LogWriter's knobs and their defaults, resolved once: the queue's bounds keep a capsule whose
 * store is away from exhausting memory, the batch bounds keep one store call short.
 */
import type { Logger } from 'pino';
import type { LingerBounds } from './batch-linger.js';

export interface LogWriterOptions {
  /** Entries held per capsule (queued + in flight) before frames and facts are dropped. */
  maxPendingEntries?: number;
  /** Approximate bytes held per capsule (facts and submissions included) before dropping. */
  maxPendingBytes?: number;
  /** After an overflow, entries are refused until the queue is below this fraction of both bounds. */
  lowWaterRatio?: number;
  /** Entries per store call. */
  maxBatch?: number;
  /** Approximate bytes per store call (a batch always holds at least one entry). */
  maxBatchBytes?: number;
  /** A busy capsule's next batch waits until this long after its previous one (`batch-linger.ts`); 0 = never. */
  appendLingerMs?: number;
  /** Entries per second above which a capsule is busy. */
  lingerAboveRate?: number;
  logger?: Logger;
  /** Retry backoff after a failed batch: base * 2^attempt, capped, jittered. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Apply the store's retention to every known capsule (idle ones too) this often; 0 = never. */
  trimIntervalMs?: number;
}

/** A capsule queue's bounds: high water (drop past it) and low water (accept again below it). */
export interface QueueBounds {
  maxEntries: number;
  maxBytes: number;
  lowEntries: number;
  lowBytes: number;
}

/** What one store call may carry. */
export interface BatchBounds {
  maxBatch: number;
  maxBatchBytes: number;
}

export interface WriterSettings {
  queue: QueueBounds;
  batch: BatchBounds;
  linger: LingerBounds;
  retryBaseMs: number;
  retryMaxMs: number;
  trimIntervalMs: number;
}

export const writerSettings = (options: LogWriterOptions): WriterSettings => {
  const maxEntries = options.maxPendingEntries ?? 100_000;
  const maxBytes = options.maxPendingBytes ?? 64 * 1024 * 1024;
  const low = options.lowWaterRatio ?? 0.5;
  return {
    queue: {
      maxEntries,
      maxBytes,
      lowEntries: Math.floor(maxEntries * low),
      lowBytes: Math.floor(maxBytes * low),
    },
    batch: {
      maxBatch: options.maxBatch ?? 1000,
      // Large tool artifacts: one Lua call must stay short (it blocks Redis while it runs).
      maxBatchBytes: options.maxBatchBytes ?? 4 * 1024 * 1024,
    },
    // 5 ms: a capsule streaming 4,000 frames/s then makes 200 store calls a second instead of 800
    // (one in flight; the rest queue behind it). Ordinary capsules (below 1,000/s) never wait.
    linger: { ms: options.appendLingerMs ?? 5, aboveRate: options.lingerAboveRate ?? 1000 },
    retryBaseMs: options.retryBaseMs ?? 50,
    retryMaxMs: options.retryMaxMs ?? 2000,
    trimIntervalMs: options.trimIntervalMs ?? 60_000,
  };
};
