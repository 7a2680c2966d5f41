/**
 * The only way ingestion writes to the log: per-capsule group commit in arrival order, one batch in
 * flight per capsule, idempotent retries while the store is away, and a bounded queue whose overflow
 * is recorded in the log as a `frames-possibly-missing` fact (issue 2, "The log"). Reads are the hub's.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { FactEntry, LogEntry } from './record.js';
import type { BatchId, LogStore } from './store.js';

export interface LogWriterOptions {
  /** Entries held per capsule (queued + in flight) before frames are dropped. */
  maxQueuedEntries?: number;
  /** Entries per store call. */
  maxBatch?: number;
  /** Approximate bytes per store call (a batch always holds at least one entry). */
  maxBatchBytes?: number;
  logger?: Logger;
  /** Retry backoff after a failed batch: base * 2^attempt, capped, jittered. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Apply the store's retention (age) at most this often per capsule; 0 = never. */
  trimIntervalMs?: number;
}

/** Where an appended entry landed. */
export interface Appended {
  offset: number;
  epoch: number;
}

export interface WriterStats {
  /** Entries queued or in flight. */
  queued: number;
  /** Frames dropped because the queue was full (each run is recorded in the log as a fact). */
  dropped: number;
  /** Batches made durable. */
  batches: number;
  /** Failed store calls (each retried). */
  failures: number;
  /** The last store failure, cleared when a batch succeeds again. */
  lastError: string | null;
}

interface Pending {
  entry: LogEntry;
  resolve: (value: Appended) => void;
  reject: (err: Error) => void;
}

type MissingFact = Extract<FactEntry, { fact: 'frames-possibly-missing' }>;

interface Lane extends Omit<WriterStats, 'queued'> {
  capsule: string;
  /** Waiting entries live in waiting[start..]: taking a batch is O(batch), not O(queue). */
  waiting: Pending[];
  start: number;
  inFlight: { id: BatchId; items: Pending[] } | null;
  scheduled: boolean;
  retryTimer: NodeJS.Timeout | null;
  attempt: number;
  /** The fact counting the current run of dropped frames, while nothing has been queued after it. */
  openMarker: MissingFact | null;
  lastTrim: number;
}

const noop = (): void => {};

/** A cheap size estimate of an encoded entry: its variable text plus the JSON around it. */
const approxBytes = (entry: LogEntry): number =>
  entry.kind === 'frame'
    ? entry.data.length + 120
    : entry.kind === 'submission'
      ? entry.text.length + 300
      : 200;

export class LogWriter {
  readonly writerId = randomUUID();
  private seq = 0;
  private readonly lanes = new Map<string, Lane>();
  private idleWaiters: (() => void)[] = [];
  private closed = false;
  private readonly maxQueued: number;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly trimIntervalMs: number;
  private readonly logger: Logger | undefined;

  constructor(
    private readonly store: LogStore,
    options: LogWriterOptions = {},
  ) {
    this.maxQueued = options.maxQueuedEntries ?? 100_000;
    this.maxBatch = options.maxBatch ?? 1000;
    // Large tool artifacts: one Lua call must stay short (it blocks Redis while it runs).
    this.maxBatchBytes = options.maxBatchBytes ?? 4 * 1024 * 1024;
    this.retryBaseMs = options.retryBaseMs ?? 50;
    this.retryMaxMs = options.retryMaxMs ?? 2000;
    this.trimIntervalMs = options.trimIntervalMs ?? 60_000;
    this.logger = options.logger;
  }

  /**
   * Queue an entry (synchronously, never blocking the caller); the promise resolves once it is
   * durable. When the capsule's queue is full a frame is dropped (counted, and recorded in the log
   * where the drop began) and a submission is refused: both reject with `store_unavailable`.
   * Callers may ignore the promise: a rejection nobody awaits never becomes an unhandled one.
   */
  append(capsule: string, entry: LogEntry): Promise<Appended> {
    const promise = this.enqueue(capsule, entry);
    promise.catch(noop);
    return promise;
  }

  /** Resolve once everything queued so far (and since) is durable; the caller bounds the wait. */
  flush(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stop: pending entries are rejected with `shutting_down`. Flush first to drain. */
  async close(): Promise<void> {
    this.closed = true;
    const err = new GatewayError('shutting_down', 'log writer closed');
    for (const lane of this.lanes.values()) {
      if (lane.retryTimer) clearTimeout(lane.retryTimer);
      lane.retryTimer = null;
      for (const p of lane.waiting.slice(lane.start)) p.reject(err);
      for (const p of lane.inFlight?.items ?? []) p.reject(err);
      lane.waiting = [];
      lane.start = 0;
      lane.inFlight = null;
    }
    this.settleIdle();
  }

  /** Totals over all capsules. */
  stats(): WriterStats {
    const total: WriterStats = { queued: 0, dropped: 0, batches: 0, failures: 0, lastError: null };
    for (const lane of this.lanes.values()) {
      total.queued += this.queued(lane);
      total.dropped += lane.dropped;
      total.batches += lane.batches;
      total.failures += lane.failures;
      total.lastError = lane.lastError ?? total.lastError;
    }
    return total;
  }

  /** One capsule's figures (undefined before its first append). */
  capsuleStats(capsule: string): WriterStats | undefined {
    const lane = this.lanes.get(capsule);
    if (!lane) return undefined;
    const { dropped, batches, failures, lastError } = lane;
    return { queued: this.queued(lane), dropped, batches, failures, lastError };
  }

  /**
   * Queue an entry without a promise: the ingestion hot path, which never awaits a frame (a promise
   * and its callbacks per frame were a measurable share of ingest GC). Same rules as append: a
   * frame that finds the queue full is dropped and counted in the log where the drops began.
   */
  write(capsule: string, entry: LogEntry): void {
    if (this.closed) return;
    const lane = this.lane(capsule);
    if (this.full(lane, entry)) {
      if (entry.kind === 'frame') this.drop(lane, entry.receivedAt);
      else this.logger?.error({ capsule }, 'log queue full: submission not recorded');
      return;
    }
    this.push(lane, { entry, resolve: noop, reject: noop });
  }

  private enqueue(capsule: string, entry: LogEntry): Promise<Appended> {
    if (this.closed) {
      return Promise.reject(new GatewayError('shutting_down', 'log writer closed'));
    }
    const lane = this.lane(capsule);
    if (this.full(lane, entry)) {
      if (entry.kind === 'submission') {
        return Promise.reject(
          new GatewayError('store_unavailable', 'log store unavailable: submission not recorded'),
        );
      }
      this.drop(lane, entry.receivedAt);
      return Promise.reject(
        new GatewayError('store_unavailable', 'log queue full: frame dropped', { dropped: true }),
      );
    }
    return new Promise<Appended>((resolve, reject) => this.push(lane, { entry, resolve, reject }));
  }

  /** Facts are rare and carry what the log must say (connections, gaps): they are never dropped. */
  private full(lane: Lane, entry: LogEntry): boolean {
    return this.queued(lane) >= this.maxQueued && entry.kind !== 'fact';
  }

  private push(lane: Lane, pending: Pending): void {
    lane.waiting.push(pending);
    lane.openMarker = null;
    this.schedule(lane);
  }

  /** Count a dropped frame on the fact that sits exactly where this run of drops began. */
  private drop(lane: Lane, receivedAt: number): void {
    lane.dropped++;
    if (!lane.openMarker) {
      const marker: MissingFact = {
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'store-unavailable',
        count: 0,
        receivedAt,
      };
      lane.waiting.push({ entry: marker, resolve: noop, reject: noop });
      lane.openMarker = marker;
      if (lane.dropped === 1 || lane.lastError) {
        this.logger?.warn({ capsule: lane.capsule }, 'log queue full: dropping frames');
      }
    }
    lane.openMarker.count = (lane.openMarker.count ?? 0) + 1;
  }

  private schedule(lane: Lane): void {
    if (lane.scheduled || lane.inFlight || lane.retryTimer || this.waitingCount(lane) === 0) return;
    lane.scheduled = true;
    // A microtask later: everything appended in the same synchronous run joins one batch.
    queueMicrotask(() => {
      lane.scheduled = false;
      this.sendNext(lane);
    });
  }

  private sendNext(lane: Lane): void {
    if (this.closed || lane.inFlight || lane.retryTimer || this.waitingCount(lane) === 0) return;
    const limit = Math.min(lane.waiting.length, lane.start + this.maxBatch);
    let end = lane.start + 1;
    let bytes = approxBytes(lane.waiting[lane.start]!.entry);
    for (; end < limit; end++) {
      bytes += approxBytes(lane.waiting[end]!.entry);
      if (bytes > this.maxBatchBytes) break;
    }
    const items = lane.waiting.slice(lane.start, end);
    lane.start = end;
    if (lane.start > 4096 && lane.start * 2 > lane.waiting.length) {
      lane.waiting = lane.waiting.slice(lane.start);
      lane.start = 0;
    }
    // The marker is now frozen into this batch (a retry re-sends the same entries): later drops
    // start a new run with a new marker.
    if (this.waitingCount(lane) === 0) lane.openMarker = null;
    lane.inFlight = { id: { writerId: this.writerId, seq: ++this.seq }, items };
    this.attempt(lane);
  }

  /** Send the in-flight batch; on failure retry the SAME batch (same BatchId) after a backoff. */
  private attempt(lane: Lane): void {
    const batch = lane.inFlight;
    if (!batch || this.closed) return;
    const entries = batch.items.map((p) => p.entry);
    this.store.append(lane.capsule, entries, batch.id).then(
      (result) => {
        if (lane.inFlight !== batch) return; // closed meanwhile
        const offsets = result.offsets.length > 0 ? result.offsets : (result.appliedOffsets ?? []);
        if (offsets.length !== batch.items.length) {
          this.logger?.error(
            { capsule: lane.capsule, expected: batch.items.length, got: offsets.length },
            'store returned an unexpected number of offsets',
          );
        }
        batch.items.forEach((p, i) => p.resolve({ offset: offsets[i] ?? 0, epoch: result.epoch }));
        if (lane.lastError) {
          this.logger?.info({ capsule: lane.capsule, failures: lane.attempt }, 'log store back');
        }
        lane.inFlight = null;
        lane.attempt = 0;
        lane.lastError = null;
        lane.batches++;
        this.maybeTrim(lane);
        this.sendNext(lane);
        this.settleIdle();
      },
      (err: unknown) => {
        if (lane.inFlight !== batch || this.closed) return;
        lane.failures++;
        lane.attempt++;
        lane.lastError = err instanceof Error ? err.message : String(err);
        const log = lane.attempt === 1 ? this.logger?.warn : this.logger?.debug;
        log?.call(
          this.logger,
          { capsule: lane.capsule, err: lane.lastError, queued: this.queued(lane) },
          'log append failed; retrying',
        );
        const exp = Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** (lane.attempt - 1));
        lane.retryTimer = setTimeout(
          () => {
            lane.retryTimer = null;
            this.attempt(lane);
          },
          exp / 2 + (Math.random() * exp) / 2,
        );
      },
    );
  }

  private maybeTrim(lane: Lane): void {
    if (this.trimIntervalMs <= 0) return;
    const now = Date.now();
    if (now - lane.lastTrim < this.trimIntervalMs) return;
    lane.lastTrim = now;
    this.store.trim(lane.capsule).catch((err: unknown) => {
      this.logger?.debug({ capsule: lane.capsule, err: String(err) }, 'log trim failed');
    });
  }

  private lane(capsule: string): Lane {
    let lane = this.lanes.get(capsule);
    if (!lane) {
      lane = {
        capsule,
        waiting: [],
        start: 0,
        inFlight: null,
        scheduled: false,
        retryTimer: null,
        attempt: 0,
        openMarker: null,
        lastTrim: Date.now(),
        dropped: 0,
        batches: 0,
        failures: 0,
        lastError: null,
      };
      this.lanes.set(capsule, lane);
    }
    return lane;
  }

  private waitingCount(lane: Lane): number {
    return lane.waiting.length - lane.start;
  }

  private queued(lane: Lane): number {
    return this.waitingCount(lane) + (lane.inFlight?.items.length ?? 0);
  }

  private isIdle(): boolean {
    if (this.closed) return true;
    for (const lane of this.lanes.values()) if (this.queued(lane) > 0) return false;
    return true;
  }

  private settleIdle(): void {
    if (this.idleWaiters.length === 0 || !this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
