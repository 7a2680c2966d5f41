/**
 * The log contract: one append-only log per capsule, offsets minted atomically with the append.
 * Implementations: `memory-store.ts` (embedded, zero set-up) and `redis-store.ts` (Redis Streams).
 * Batching, outage queueing and retries live in `log-writer.ts`; waiting for new records lives here.
 */
import type { LogEntry, LogRecord } from './record.js';

/** Where a log stands. `epoch` changes only when the store lost the log; offsets restart at 1 then. */
export interface LogPosition {
  /** Highest offset written (0 when the log is empty). */
  head: number;
  /** Lowest offset still retained (head + 1 when nothing is retained). */
  first: number;
  /** Store generation: a positive integer below 10^16 (it is printed zero-padded to 16 digits). */
  epoch: number;
}

export interface AppendResult {
  /** Offsets given to the entries, in order. */
  offsets: number[];
  epoch: number;
  /**
   * Only when `batch` was already applied (so `offsets` is empty): the offsets that batch got then,
   * in this same epoch, so a writer retrying after a lost reply can still tell its callers where
   * their entries landed.
   */
  appliedOffsets?: number[];
}

export interface ReadResult {
  /** Records with offset > after, in order, at most `limit`. */
  records: LogRecord[];
  position: LogPosition;
}

export interface RetentionPolicy {
  /** Keep at most this many records per capsule (0 = unbounded). */
  maxRecords: number;
  /** Drop records older than this many ms (0 = keep forever). */
  maxAgeMs: number;
}

/** Identifies one writer's batch so a retried append after a lost reply is applied at most once. */
export interface BatchId {
  writerId: string;
  seq: number;
}

export interface LogStore {
  /** 'memory' or 'redis', for logs and /capsules. */
  readonly kind: 'memory' | 'redis';
  /**
   * Append entries in order, minting offsets in the same atomic step. When `batch` was already
   * applied (a retry after a lost reply) nothing is appended and `offsets` is empty.
   */
  append(capsule: string, entries: LogEntry[], batch?: BatchId): Promise<AppendResult>;
  /** Records after `after` (exclusive), at most `limit`, oldest first. Never loads a whole log. */
  read(capsule: string, after: number, limit: number): Promise<ReadResult>;
  /** The last `count` records, oldest first (for replay reconciliation after a restart). */
  readLast(capsule: string, count: number): Promise<LogRecord[]>;
  position(capsule: string): Promise<LogPosition>;
  /**
   * Resolve as soon as a record with offset > after exists (or at once if one does), with a batch of
   * them; resolve with an empty batch after `timeoutMs` or when `signal` aborts. The hub calls this
   * once per capsule; adapters never do.
   */
  waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<ReadResult>;
  /** Apply retention now (the stores also apply count retention on append). */
  trim(capsule: string): Promise<void>;
  /** Whether the store answers (readyz). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}
