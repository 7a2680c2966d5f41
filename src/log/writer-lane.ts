/**
 * The LogWriter's per-capsule state (`log-writer.ts`): the queue, the batch in flight, the bounds'
 * accounting and the floor. Kept apart so the writer reads as behaviour.
 */
import { newLingerState, type LingerState } from './batch-linger.js';
import type { FactEntry, LogEntry } from './record.js';
import type { BatchId } from './store.js';
import type { Context } from '../tracing.js';

/** Where an appended entry landed. */
export interface Appended {
  offset: number;
  epoch: number;
}

export type MissingFact = Extract<FactEntry, { fact: 'frames-possibly-missing' }>;

/** One queued entry with its caller's settlement. */
export interface Pending {
  entry: LogEntry;
  /** approxBytes(entry), counted against the lane's byte bound until the entry settles. */
  bytes: number;
  resolve: (value: Appended) => void;
  reject: (err: Error) => void;
  /** The batch holding it once taken from the queue (null while waiting). */
  batch: Batch | null;
  signal?: AbortSignal;
  onAbort?: () => void;
  /** Withdrawn by its signal: skipped when batches are formed, already rejected. */
  withdrawn?: boolean;
  /** The owner's fencing token when a frame or fact was queued (submissions are never fenced). */
  fence?: number;
  /** The caller's trace context, when traced (tracing.ts): its batch's store round trip joins it. */
  trace?: Context;
}

export interface Batch {
  id: BatchId;
  items: Pending[];
  /** Built once per batch so a retry sends the same bytes. */
  resetFact: FactEntry;
  /** Some attempt may have reached the store: from now on the batch is retried exactly as is. */
  maybeSent: boolean;
  /** An attempt is awaiting the store's answer. */
  attempting: boolean;
  /** The fencing token of its frames and facts (one token per batch). */
  fence?: number;
}

export interface Lane {
  capsule: string;
  /** Waiting entries live in waiting[start..]: taking a batch is O(batch), not O(queue). */
  waiting: Pending[];
  start: number;
  /** Entries and approximate bytes queued or in flight (withdrawn ones no longer count). */
  count: number;
  bytes: number;
  /** The highest offset seen durable in this capsule's log: the store fences anything below it. */
  floor: number;
  /** The fencing token stamped on frames and facts queued now (src/fleet); undefined = unfenced. */
  fence?: number;
  /** Refusing entries since the queue overflowed, until it is below the low-water mark. */
  overflow: boolean;
  roomWaiters: (() => void)[];
  inFlight: Batch | null;
  scheduled: boolean;
  retryTimer: NodeJS.Timeout | null;
  /** Group commit of a busy capsule (`batch-linger.ts`). */
  linger: LingerState;
  attempt: number;
  /** The fact counting the current run of dropped entries, while nothing has been queued after it. */
  openMarker: MissingFact | null;
  dropped: number;
  discarded: number;
  batches: number;
  failures: number;
  lastError: string | null;
}

/** A cheap size estimate of an encoded entry: its variable text plus the JSON around it. */
export const approxBytes = (entry: LogEntry): number =>
  entry.kind === 'frame'
    ? entry.data.length + 120
    : entry.kind === 'submission'
      ? entry.text.length + 300 + (entry.meta ? JSON.stringify(entry.meta).length : 0)
      : 200;

/** A capsule's lane before its first entry. */
export const newLane = (capsule: string): Lane => ({
  capsule,
  waiting: [],
  start: 0,
  count: 0,
  bytes: 0,
  floor: 0,
  overflow: false,
  roomWaiters: [],
  inFlight: null,
  scheduled: false,
  retryTimer: null,
  linger: newLingerState(),
  attempt: 0,
  openMarker: null,
  dropped: 0,
  discarded: 0,
  batches: 0,
  failures: 0,
  lastError: null,
});
