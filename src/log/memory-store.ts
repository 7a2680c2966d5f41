/**
 * The embedded log store: one in-process array per capsule, zero set-up, nothing survives a restart.
 * Same semantics as the Redis store (the contract suite runs on both): every log of a process starts
 * a new epoch at the time floor (so a restarted gateway never reuses an offset a client holds), and a
 * writer floor above the head is fenced with a new epoch like a Redis rollback. Batching and retries
 * are the writer's (`log-writer.ts`).
 */
import { encodeEntry, frameRecord, type LogEntry, type LogRecord } from './record.js';

/**
 * An entry's size as the Redis store would hold it, for retention by bytes. Frames (nearly every
 * record) are sized from their fields: serialising each just to measure it cost more than the append.
 */
const FRAME_ENVELOPE = encodeEntry({
  kind: 'frame',
  event: '',
  upstreamId: '',
  data: '',
  receivedAt: 0,
}).length;
const entrySize = (entry: LogEntry): number =>
  entry.kind === 'frame'
    ? FRAME_ENVELOPE + entry.event.length + (entry.upstreamId?.length ?? 0) + entry.data.length + 12
    : encodeEntry(entry).length;
import {
  storeResetFact,
  timeFloor,
  type AppendOptions,
  type AppendResult,
  type LogPosition,
  type LogStore,
  type ReadResult,
  type RetentionPolicy,
} from './store.js';

interface Waiter {
  after: number;
  limit: number;
  resolve: (result: ReadResult) => void;
  cleanup: () => void;
}

interface CapsuleLog {
  epoch: number;
  /** Highest offset minted. */
  head: number;
  /**
   * Retained records live in records[start..], offsets increasing; contiguous except where a new
   * epoch jumped, so reads find their place by binary search.
   */
  records: LogRecord[];
  start: number;
  /** Encoded size of each record (parallel to records) and the total of the retained ones. */
  sizes: number[];
  bytes: number;
  /** frames-possibly-missing facts appended, ever (operators' count in /capsules). */
  missing: number;
  /** Per writer: the last applied batch seq and the offsets it got (idempotent retries). */
  writers: Map<string, { seq: number; offsets: number[]; reset: boolean }>;
  waiters: Set<Waiter>;
}

const NO_RETENTION: RetentionPolicy = { maxRecords: 0, maxAgeMs: 0 };

/** Now in ms with µs precision: the time floor counts microseconds. */
const preciseNow = (): number => performance.timeOrigin + performance.now();

/** Epochs in microseconds (< 10^16), distinct within the process even when minted in one ms. */
let lastEpoch = 0;
const newEpoch = (): number => (lastEpoch = Math.max(Date.now() * 1000, lastEpoch + 1));

export class MemoryStore implements LogStore {
  readonly kind = 'memory' as const;
  private readonly logs = new Map<string, CapsuleLog>();
  private closed = false;

  constructor(private readonly retention: RetentionPolicy = NO_RETENTION) {}

  async append(capsule: string, entries: LogEntry[], options: AppendOptions = {}): Promise<AppendResult> {
    const log = this.log(capsule);
    const { batch } = options;
    if (batch) {
      const last = log.writers.get(batch.writerId);
      if (last && batch.seq <= last.seq) {
        if (last.reset) return { offsets: [...last.offsets], epoch: log.epoch, reset: true };
        return { offsets: [], epoch: log.epoch, appliedOffsets: [...last.offsets] };
      }
    }
    // The writer saw more than this log holds (a log it knew from elsewhere): fence it like
    // append.lua does, a new epoch above everything with the reset fact first and alone.
    const regressed = (options.floor ?? 0) > log.head;
    if (regressed) {
      log.epoch = newEpoch();
      log.head = Math.max(options.floor ?? 0, log.head, timeFloor(preciseNow()));
    }
    const offsets: number[] = [];
    for (const entry of regressed ? [options.resetFact ?? storeResetFact()] : entries) {
      const offset = ++log.head;
      // A frozen copy: readers share record objects, and the caller keeps its own entry.
      const record = entry.kind === 'frame' ? frameRecord(entry, offset) : { ...entry, offset };
      log.records.push(Object.freeze(record));
      if (entry.kind === 'fact' && entry.fact === 'frames-possibly-missing') log.missing++;
      if (this.retention.maxBytes) {
        const size = entrySize(entry);
        log.sizes[log.records.length - 1] = size;
        log.bytes += size;
      }
      offsets.push(offset);
    }
    if (batch) log.writers.set(batch.writerId, { seq: batch.seq, offsets, reset: regressed });
    this.applyRetention(log);
    if (offsets.length > 0) this.wake(log);
    return regressed ? { offsets, epoch: log.epoch, reset: true } : { offsets, epoch: log.epoch };
  }

  async possiblyMissing(capsule: string): Promise<number> {
    return this.logs.get(capsule)?.missing ?? 0;
  }

  async read(capsule: string, after: number, limit: number): Promise<ReadResult> {
    return this.readNow(this.log(capsule), after, limit);
  }

  async readLast(capsule: string, count: number): Promise<LogRecord[]> {
    const log = this.log(capsule);
    if (count <= 0) return [];
    return log.records.slice(Math.max(log.start, log.records.length - count));
  }

  async position(capsule: string): Promise<LogPosition> {
    return this.positionOf(this.log(capsule));
  }

  waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<ReadResult> {
    const log = this.log(capsule);
    const now = this.readNow(log, after, limit);
    if (now.records.length > 0 || timeoutMs <= 0 || signal?.aborted || this.closed) {
      return Promise.resolve(now);
    }
    return new Promise<ReadResult>((resolve) => {
      const finish = (): void => {
        waiter.cleanup();
        resolve(this.readNow(log, after, limit));
      };
      const timer = setTimeout(finish, timeoutMs);
      const waiter: Waiter = {
        after,
        limit,
        resolve,
        cleanup: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', finish);
          log.waiters.delete(waiter);
        },
      };
      // An aborted waiter leaves the set at once: a client that hangs up leaks nothing.
      signal?.addEventListener('abort', finish, { once: true });
      log.waiters.add(waiter);
    });
  }

  async trim(capsule: string): Promise<void> {
    const log = this.logs.get(capsule);
    if (log) this.applyRetention(log);
  }

  async ping(): Promise<boolean> {
    return !this.closed;
  }

  private readonly secrets = new Map<string, string>();

  /** One process is the whole fleet here: the first candidate is kept. */
  async sharedSecret(name: string, candidate: string): Promise<string> {
    if (!this.secrets.has(name)) this.secrets.set(name, candidate);
    return this.secrets.get(name)!;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const log of this.logs.values()) {
      for (const waiter of [...log.waiters]) {
        waiter.cleanup();
        waiter.resolve(this.readNow(log, waiter.after, waiter.limit));
      }
    }
  }

  /**
   * The capsule's log, created on first use: a new epoch (its creation time in µs, < 10^16) whose
   * offsets start above the time floor.
   */
  private log(capsule: string): CapsuleLog {
    let log = this.logs.get(capsule);
    if (!log) {
      log = {
        epoch: newEpoch(),
        head: timeFloor(preciseNow()),
        records: [],
        start: 0,
        sizes: [],
        bytes: 0,
        missing: 0,
        writers: new Map(),
        waiters: new Set(),
      };
      this.logs.set(capsule, log);
    }
    return log;
  }

  private positionOf(log: CapsuleLog): LogPosition {
    const first = log.records[log.start]?.offset ?? log.head + 1;
    return { head: log.head, first, epoch: log.epoch };
  }

  private readNow(log: CapsuleLog, after: number, limit: number): ReadResult {
    const position = this.positionOf(log);
    if (limit <= 0 || after >= position.head) return { records: [], position };
    // The first retained record with offset > after.
    let lo = log.start;
    let hi = log.records.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((log.records[mid]?.offset ?? 0) > after) hi = mid;
      else lo = mid + 1;
    }
    return { records: log.records.slice(lo, lo + limit), position };
  }

  private wake(log: CapsuleLog): void {
    for (const waiter of [...log.waiters]) {
      if (log.head > waiter.after) {
        waiter.cleanup();
        waiter.resolve(this.readNow(log, waiter.after, waiter.limit));
      }
    }
  }

  private applyRetention(log: CapsuleLog): void {
    const { maxRecords, maxAgeMs, maxBytes = 0 } = this.retention;
    let start = log.start;
    if (maxRecords > 0) start = Math.max(start, log.records.length - maxRecords);
    if (maxAgeMs > 0) {
      // Oldest first: stop at the first record young enough (receive times are near-monotonic).
      const cutoff = Date.now() - maxAgeMs;
      while (start < log.records.length && (log.records[start]?.receivedAt ?? 0) < cutoff) start++;
    }
    if (maxBytes > 0) {
      for (let i = log.start; i < start; i++) log.bytes -= log.sizes[i] ?? 0;
      // The newest record always stays, however large.
      while (log.bytes > maxBytes && start < log.records.length - 1) log.bytes -= log.sizes[start++] ?? 0;
    }
    log.start = start;
    // Compact once the dead prefix outweighs the live part: amortised O(1) per append.
    if (log.start > 1024 && log.start * 2 > log.records.length) {
      log.records = log.records.slice(log.start);
      log.sizes = log.sizes.slice(log.start);
      log.start = 0;
    }
  }
}
