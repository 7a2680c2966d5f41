/**
 * The log contract: one append-only log per capsule, offsets minted atomically with the append.
 * Implementations: `memory-store.ts` (embedded, zero set-up) and `redis-store.ts` (Redis Streams).
 * Batching, outage queueing and retries live in `log-writer.ts`; waiting for new records lives here.
 */
import { GatewayError } from '../errors.js';
import type { FactEntry, LogEntry, LogRecord } from './record.js';

/**
 * Where a log stands. `epoch` changes only when the store lost records: offsets of a new
 * epoch continue above every offset handed out before (see AppendOptions.floor and `timeFloor`), so
 * a bare numeric cursor from an old epoch is never answered with other content.
 */
export interface LogPosition {
  /** Highest offset written (0 when the log is empty). */
  head: number;
  /** Lowest offset still retained (head + 1 when nothing is retained). */
  first: number;
  /** Store generation: a positive integer below 10^16 (it is printed zero-padded to 16 digits). */
  epoch: number;
}

export interface AppendResult {
  /** Offsets given to the entries, in order (with `reset`: the reset fact's offset alone). */
  offsets: number[];
  epoch: number;
  /**
   * The store had regressed (see AppendOptions.floor): a new epoch began with the reset fact as its
   * first record, and none of the entries were appended.
   */
  reset?: true;
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
  /**
   * Keep about this many bytes per capsule (0 or absent = unbounded): a flood of large records
   * pushes out old history only down to this bound. Approximate: Redis's own memory estimate of the
   * stream, the encoded size of each record in memory.
   */
  maxBytes?: number;
}

/** Identifies one writer's batch so a retried append after a lost reply is applied at most once. */
export interface BatchId {
  writerId: string;
  seq: number;
}

export interface AppendOptions {
  /** Idempotent retry: a batch already applied is not applied again (answered as it was then). */
  batch?: BatchId;
  /**
   * The highest offset this writer has seen durable in this capsule's log (0 = none). A store whose
   * counter is below it, or below its own last record, or whose meta key is gone while the log has a
   * past, has lost records: it starts a NEW EPOCH, appends `resetFact` as that epoch's first record,
   * appends nothing of `entries`, and answers `reset: true`. Old records that survived are kept.
   */
  floor?: number;
  /** A `frames-possibly-missing` fact with reason `store-reset`; the store makes one when absent. */
  resetFact?: FactEntry;
  /**
   * The ingesting owner's fencing token (src/fleet). A store shared by replicas refuses the batch,
   * appending nothing, when the capsule's current token is higher (another replica took the capsule
   * over): the append rejects with an error `fenced(err)` recognises. The memory store ignores it.
   */
  fence?: number;
}

/** Whether an append was refused because its fencing token is older than the capsule's current one. */
export const fenced = (err: unknown): boolean => err instanceof GatewayError && err.details?.fenced === true;

/** 2026-01-01T00:00:00Z, the origin of the time floor. */
const TIME_FLOOR_ORIGIN_MS = Date.UTC(2026, 0, 1);

/**
 * The lowest offset a new epoch starting at `nowMs` may mint: microseconds since 2026-01-01Z. An
 * epoch hands out at most one offset per microsecond of its life, so a log lost together with every
 * floor (a Redis that lost everything while the gateway also restarted) still never reuses an
 * offset a client holds. append.lua and read.lua compute the same from Redis TIME.
 */
export const timeFloor = (nowMs = Date.now()): number =>
  Math.max(0, Math.floor((nowMs - TIME_FLOOR_ORIGIN_MS) * 1000));

/** The fact a store appends when it starts a new epoch for lack of one from the caller. */
export const storeResetFact = (receivedAt = Date.now()): FactEntry => ({
  kind: 'fact',
  fact: 'frames-possibly-missing',
  reason: 'store-reset',
  receivedAt,
});

/**
 * The one record every layer must recognise: a new epoch's first record (storeResetFact). A store
 * that lost records starts a new epoch whose offsets continue above every offset handed out before,
 * opening with this fact, so offsets jump to it and a reader resuming from any older cursor meets it
 * first.
 */
export const isStoreReset = (record: LogRecord): boolean =>
  record.kind === 'fact' && record.fact === 'frames-possibly-missing' && record.reason === 'store-reset';

/**
 * Whether a failed store call certainly never reached the store (no connection): its batch may then
 * be re-formed. Any other failure is ambiguous (sent, no reply) and must be retried as is.
 */
export const notSent = (err: unknown): boolean =>
  err instanceof GatewayError && err.details?.notSent === true;

export interface LogStore {
  /** 'memory' or 'redis', for logs and /capsules. */
  readonly kind: 'memory' | 'redis';
  /**
   * Append entries in order, minting offsets in the same atomic step. When `options.batch` was
   * already applied (a retry after a lost reply) nothing is appended and `offsets` is empty. When the
   * store regressed (see AppendOptions.floor) only the reset fact is appended (`reset: true`).
   * A failure that certainly never reached the store carries `details.notSent` (see `notSent`).
   */
  append(capsule: string, entries: LogEntry[], options?: AppendOptions): Promise<AppendResult>;
  /** Records after `after` (exclusive), at most `limit`, oldest first. Never loads a whole log. */
  read(capsule: string, after: number, limit: number): Promise<ReadResult>;
  /** The last `count` records, oldest first (for replay reconciliation after a restart). */
  readLast(capsule: string, count: number): Promise<LogRecord[]>;
  position(capsule: string): Promise<LogPosition>;
  /** How many `frames-possibly-missing` facts the log has recorded, ever (operators' count). */
  possiblyMissing(capsule: string): Promise<number>;
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
  /** Apply retention now (the stores also apply count retention on append; age only here). */
  trim(capsule: string): Promise<void>;
  /** Whether the store answers (readyz). */
  ping(): Promise<boolean>;
  /**
   * A secret shared by every replica on this store (e.g. the ticket signing key): the value stored
   * under `name`, or `candidate` stored there first if there was none (one winner across replicas).
   */
  sharedSecret?(name: string, candidate: string): Promise<string>;
  close(): Promise<void>;
}
