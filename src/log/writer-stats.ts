/**
 * The LogWriter's figures for /capsules and metrics: read off each capsule's lane, summed on demand
 * so the hot path only bumps counters.
 */
import type { Lane } from './writer-lane.js';

export interface WriterStats {
  /** Entries queued or in flight. */
  queued: number;
  /** Approximate bytes queued or in flight. */
  queuedBytes: number;
  /** Entries dropped because the queue was full (each run is recorded in the log as a fact). */
  dropped: number;
  /** Frames discarded because the store regressed (a new epoch; the replay re-delivers them). */
  discarded: number;
  /** Batches made durable. */
  batches: number;
  /** Failed store calls (each retried). */
  failures: number;
  /** The last store failure, cleared when a batch succeeds again. */
  lastError: string | null;
}

export const laneStats = (lane: Lane): WriterStats => {
  const { count: queued, bytes: queuedBytes, dropped, discarded, batches, failures, lastError } = lane;
  return { queued, queuedBytes, dropped, discarded, batches, failures, lastError };
};

/** Totals over all capsules. */
export const totalStats = (lanes: Iterable<Lane>): WriterStats => {
  const total: WriterStats = {
    queued: 0,
    queuedBytes: 0,
    dropped: 0,
    discarded: 0,
    batches: 0,
    failures: 0,
    lastError: null,
  };
  for (const lane of lanes) {
    const s = laneStats(lane);
    for (const k of ['queued', 'queuedBytes', 'dropped', 'discarded', 'batches', 'failures'] as const) {
      total[k] += s[k];
    }
    total.lastError = lane.lastError ?? total.lastError;
  }
  return total;
};
