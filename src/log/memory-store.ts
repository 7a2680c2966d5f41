/**
 * The embedded log store: one in-process array per capsule, zero set-up, nothing survives a restart.
 * Same semantics as the Redis store (the contract suite runs on both); batching and retries are the
 * writer's (`log-writer.ts`).
 */
import type { LogEntry, LogRecord } from './record.js';
import type { AppendResult, BatchId, LogPosition, LogStore, ReadResult, RetentionPolicy } from './store.js';

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
  /** Retained records live in records[start..]; offsets are contiguous, so index = offset arithmetic. */
  records: LogRecord[];
  start: number;
  /** Per writer: the last applied batch seq and the offsets it got (idempotent retries). */
  writers: Map<string, { seq: number; offsets: number[] }>;
  waiters: Set<Waiter>;
}

const NO_RETENTION: RetentionPolicy = { maxRecords: 0, maxAgeMs: 0 };

export class MemoryStore implements LogStore {
  readonly kind = 'memory' as const;
  private readonly logs = new Map<string, CapsuleLog>();
  private closed = false;

  constructor(private readonly retention: RetentionPolicy = NO_RETENTION) {}

  async append(capsule: string, entries: LogEntry[], batch?: BatchId): Promise<AppendResult> {
    const log = this.log(capsule);
    if (batch) {
      const last = log.writers.get(batch.writerId);
      if (last && batch.seq <= last.seq) {
        return { offsets: [], epoch: log.epoch, appliedOffsets: [...last.offsets] };
      }
    }
    const offsets: number[] = [];
    for (const entry of entries) {
      const offset = ++log.head;
      // A frozen copy: readers share record objects, and the caller keeps its own entry.
      log.records.push(Object.freeze({ ...entry, offset }) as LogRecord);
      offsets.push(offset);
    }
    if (batch) log.writers.set(batch.writerId, { seq: batch.seq, offsets });
    this.applyRetention(log);
    if (offsets.length > 0) this.wake(log);
    return { offsets, epoch: log.epoch };
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

  async close(): Promise<void> {
    this.closed = true;
    for (const log of this.logs.values()) {
      for (const waiter of [...log.waiters]) {
        waiter.cleanup();
        waiter.resolve(this.readNow(log, waiter.after, waiter.limit));
      }
    }
  }

  /** The capsule's log, created on first use: its epoch is the creation time (ms, < 10^16). */
  private log(capsule: string): CapsuleLog {
    let log = this.logs.get(capsule);
    if (!log) {
      log = {
        epoch: Date.now(),
        head: 0,
        records: [],
        start: 0,
        writers: new Map(),
        waiters: new Set(),
      };
      this.logs.set(capsule, log);
    }
    return log;
  }

  private positionOf(log: CapsuleLog): LogPosition {
    const retained = log.records.length - log.start;
    return { head: log.head, first: log.head - retained + 1, epoch: log.epoch };
  }

  private readNow(log: CapsuleLog, after: number, limit: number): ReadResult {
    const position = this.positionOf(log);
    const from = Math.max(after + 1, position.first);
    if (limit <= 0 || from > position.head) return { records: [], position };
    const index = log.start + (from - position.first);
    return { records: log.records.slice(index, index + limit), position };
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
    const { maxRecords, maxAgeMs } = this.retention;
    let start = log.start;
    if (maxRecords > 0) start = Math.max(start, log.records.length - maxRecords);
    if (maxAgeMs > 0) {
      // Oldest first: stop at the first record young enough (receive times are near-monotonic).
      const cutoff = Date.now() - maxAgeMs;
      while (start < log.records.length && (log.records[start]?.receivedAt ?? 0) < cutoff) start++;
    }
    log.start = start;
    // Compact once the dead prefix outweighs the live part: amortised O(1) per append.
    if (log.start > 1024 && log.start * 2 > log.records.length) {
      log.records = log.records.slice(log.start);
      log.start = 0;
    }
  }
}
