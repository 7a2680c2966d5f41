/**
 * The only way ingestion writes to the log: per-capsule group commit in arrival order, one batch in
 * flight per capsule, idempotent retries while the store is away, a queue bounded in bytes whose
 * overflow is recorded in the log as one `frames-possibly-missing` fact per run, and a floor (the
 * highest offset seen durable) passed with every append so a store that lost records starts a new
 * epoch instead of re-using offsets (issue 8), and the capsule owner's fencing token (issue 9,
 * src/fleet): a batch the store refuses as fenced comes from a replica that lost the capsule, so its
 * frames and facts are dropped (the new owner's replay restores them), its submissions re-sent
 * unfenced (any replica may record one), and `onFenced` listeners stop the ingestion. Reads are the hub's.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { LogEntry } from './record.js';
import { RetentionSweeper } from './retention-sweeper.js';
import { fenced, notSent, storeResetFact, type AppendResult, type LogStore } from './store.js';
import { approxBytes, type Batch, type Lane, type MissingFact, type Pending } from './writer-lane.js';

export interface LogWriterOptions {
  /** Entries held per capsule (queued + in flight) before frames and facts are dropped. */
  maxQueuedEntries?: number;
  /** Approximate bytes held per capsule (facts and submissions included) before dropping. */
  maxQueuedBytes?: number;
  /** After an overflow, entries are refused until the queue is below this fraction of both bounds. */
  lowWaterRatio?: number;
  /** Entries per store call. */
  maxBatch?: number;
  /** Approximate bytes per store call (a batch always holds at least one entry). */
  maxBatchBytes?: number;
  logger?: Logger;
  /** Retry backoff after a failed batch: base * 2^attempt, capped, jittered. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Apply the store's retention to every known capsule (idle ones too) this often; 0 = never. */
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

const noop = (): void => {};

const withdrawnError = (): GatewayError =>
  new GatewayError('store_unavailable', 'log store unavailable: entry withdrawn before it was sent', {
    withdrawn: true,
  });

export class LogWriter {
  readonly writerId = randomUUID();
  private seq = 0;
  private readonly lanes = new Map<string, Lane>();
  /** flush() callers: everything (capsule null) or one capsule's lane. */
  private idleWaiters: { capsule: string | null; resolve: () => void }[] = [];
  private readonly resetListeners = new Set<(capsule: string) => void>();
  private readonly fencedListeners = new Set<(capsule: string, fence: number) => void>();
  private closed = false;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly lowEntries: number;
  private readonly lowBytes: number;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly sweeper: RetentionSweeper;
  private readonly logger: Logger | undefined;

  constructor(
    private readonly store: LogStore,
    options: LogWriterOptions = {},
  ) {
    this.maxEntries = options.maxQueuedEntries ?? 100_000;
    this.maxBytes = options.maxQueuedBytes ?? 64 * 1024 * 1024;
    const low = options.lowWaterRatio ?? 0.5;
    this.lowEntries = Math.floor(this.maxEntries * low);
    this.lowBytes = Math.floor(this.maxBytes * low);
    this.maxBatch = options.maxBatch ?? 1000;
    // Large tool artifacts: one Lua call must stay short (it blocks Redis while it runs).
    this.maxBatchBytes = options.maxBatchBytes ?? 4 * 1024 * 1024;
    this.retryBaseMs = options.retryBaseMs ?? 50;
    this.retryMaxMs = options.retryMaxMs ?? 2000;
    this.logger = options.logger;
    this.sweeper = new RetentionSweeper(store, options.trimIntervalMs ?? 60_000, this.logger);
  }

  /**
   * Queue an entry without a promise: the ingestion hot path (a promise per frame was a measurable
   * share of ingest GC). Returns false when the entry was NOT queued (queue full, or closed): it will
   * never reach the log, so the caller must not count it as stored. Accepted entries are retried
   * until durable (or the writer closes). While full, frames and facts are dropped and counted on one
   * `store-unavailable` fact where the run of drops began; see `whenRoom`.
   */
  write(capsule: string, entry: LogEntry): boolean {
    if (this.closed) return false;
    const lane = this.lane(capsule);
    const bytes = approxBytes(entry);
    if (this.full(lane, bytes)) {
      if (entry.kind === 'submission')
        this.logger?.error({ capsule }, 'log queue full: submission not recorded');
      else this.drop(lane, entry);
      return false;
    }
    this.push(lane, { entry, bytes, resolve: noop, reject: noop, batch: null });
    return true;
  }

  /**
   * Queue an entry; the promise resolves once it is durable. A full queue drops a frame or fact
   * (counted as in `write`) and refuses a submission: all reject with `store_unavailable`. When
   * `signal` aborts before the entry's batch was sent to the store, the entry is withdrawn (never
   * appended) and the promise rejects with `store_unavailable` `{ withdrawn: true }`; once sent, it
   * settles by the store's answer. Callers may ignore the promise (no unhandled rejection).
   */
  append(capsule: string, entry: LogEntry, options: { signal?: AbortSignal } = {}): Promise<Appended> {
    const promise = this.enqueue(capsule, entry, options.signal);
    promise.catch(noop);
    return promise;
  }

  /**
   * Call `listener(capsule)` synchronously when an append found the store regressed and a new epoch
   * began. By then every queued frame of that capsule is discarded (the capsule's replay re-delivers
   * what it still holds); submissions and facts stay queued. Returns the unsubscribe function.
   */
  onReset(listener: (capsule: string) => void): () => void {
    this.resetListeners.add(listener);
    return () => this.resetListeners.delete(listener);
  }

  /**
   * Stamp the capsule's frames and facts queued from now on with the owner's fencing token (src/fleet);
   * undefined = unfenced (the embedded store, or tests). Submissions are never fenced.
   */
  setFence(capsule: string, fence: number | undefined, options: { adopt?: number } = {}): void {
    const lane = this.lane(capsule);
    lane.fence = fence;
    // The same replica's previous term, with nobody in between: its queued entries are still true.
    if (options.adopt === undefined || fence === undefined) return;
    for (let i = lane.start; i < lane.waiting.length; i++) {
      const p = lane.waiting[i]!;
      if (p.fence === options.adopt) p.fence = fence;
    }
    // A retry of the batch in flight is safe under the new token: the dedup check comes first.
    if (lane.inFlight && lane.inFlight.fence === options.adopt) {
      lane.inFlight.fence = fence;
      for (const p of lane.inFlight.items) if (p.fence === options.adopt) p.fence = fence;
    }
  }

  /**
   * Call `listener(capsule, fence)` when the store refused a batch stamped with `fence` because another
   * replica holds a newer token: this replica lost the capsule. By then that batch's frames and facts,
   * and every queued one stamped with that token or an older one, are dropped; submissions stay queued.
   */
  onFenced(listener: (capsule: string, fence: number) => void): () => void {
    this.fencedListeners.add(listener);
    return () => this.fencedListeners.delete(listener);
  }

  /** Resolve once the capsule's queue accepts entries again (below its low-water mark after drops). */
  whenRoom(capsule: string): Promise<void> {
    const lane = this.lane(capsule);
    if (!lane.overflow || this.closed) return Promise.resolve();
    return new Promise((resolve) => lane.roomWaiters.push(resolve));
  }

  /** Include an idle capsule in the periodic retention sweep (capsules written to are included). */
  track(capsule: string): void {
    this.sweeper.track(capsule);
  }

  /**
   * Resolve once everything queued so far (and since) is durable, in every capsule or in `capsule`
   * only; the caller bounds the wait.
   */
  flush(capsule?: string): Promise<void> {
    const key = capsule ?? null;
    if (this.isIdle(key)) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push({ capsule: key, resolve }));
  }

  /** Stop: pending entries are rejected with `shutting_down`. Flush first to drain. */
  async close(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    const err = new GatewayError('shutting_down', 'log writer closed');
    for (const lane of this.lanes.values()) {
      if (lane.retryTimer) clearTimeout(lane.retryTimer);
      lane.retryTimer = null;
      for (const p of [...lane.waiting.slice(lane.start), ...(lane.inFlight?.items ?? [])]) {
        if (!p.withdrawn) this.settle(lane, p, null, err);
      }
      lane.waiting = [];
      lane.start = 0;
      lane.inFlight = null;
      this.roomNow(lane);
    }
    this.settleIdle();
  }

  /** Totals over all capsules. */
  stats(): WriterStats {
    const total: WriterStats = {
      queued: 0,
      queuedBytes: 0,
      dropped: 0,
      discarded: 0,
      batches: 0,
      failures: 0,
      lastError: null,
    };
    for (const lane of this.lanes.values()) {
      const s = this.statsOf(lane);
      for (const k of ['queued', 'queuedBytes', 'dropped', 'discarded', 'batches', 'failures'] as const) {
        total[k] += s[k];
      }
      total.lastError = lane.lastError ?? total.lastError;
    }
    return total;
  }

  /** One capsule's figures (undefined before its first entry). */
  capsuleStats(capsule: string): WriterStats | undefined {
    const lane = this.lanes.get(capsule);
    return lane ? this.statsOf(lane) : undefined;
  }

  private statsOf(lane: Lane): WriterStats {
    const { count: queued, bytes: queuedBytes, dropped, discarded, batches, failures, lastError } = lane;
    return { queued, queuedBytes, dropped, discarded, batches, failures, lastError };
  }

  private enqueue(capsule: string, entry: LogEntry, signal?: AbortSignal): Promise<Appended> {
    if (this.closed) return Promise.reject(new GatewayError('shutting_down', 'log writer closed'));
    if (signal?.aborted) return Promise.reject(withdrawnError());
    const lane = this.lane(capsule);
    const bytes = approxBytes(entry);
    if (this.full(lane, bytes)) {
      if (entry.kind === 'submission') {
        return Promise.reject(
          new GatewayError('store_unavailable', 'log store unavailable: submission not recorded'),
        );
      }
      this.drop(lane, entry);
      return Promise.reject(
        new GatewayError('store_unavailable', 'log queue full: entry dropped', { dropped: true }),
      );
    }
    return new Promise<Appended>((resolve, reject) => {
      const pending: Pending = { entry, bytes, resolve, reject, batch: null };
      if (signal) {
        pending.signal = signal;
        pending.onAbort = () => this.withdraw(lane, pending);
        signal.addEventListener('abort', pending.onAbort, { once: true });
      }
      this.push(lane, pending);
    });
  }

  /** Full: over a bound, or still refusing since an overflow (hysteresis down to the low water). */
  private full(lane: Lane, bytes: number): boolean {
    return lane.overflow || lane.count >= this.maxEntries || lane.bytes + bytes > this.maxBytes;
  }

  private push(lane: Lane, pending: Pending): void {
    if (pending.entry.kind !== 'submission' && lane.fence !== undefined) pending.fence = lane.fence;
    lane.waiting.push(pending);
    lane.count++;
    lane.bytes += pending.bytes;
    lane.openMarker = null;
    this.schedule(lane);
  }

  /**
   * Count a dropped entry on the fact that sits exactly where this run of drops began. The marker
   * itself is queued past the bound (one small fact per run): the log must say frames are missing.
   */
  private drop(lane: Lane, entry: LogEntry): void {
    lane.dropped++;
    if (!lane.overflow) {
      lane.overflow = true;
      this.logger?.warn(
        { capsule: lane.capsule, queued: lane.count, bytes: lane.bytes },
        'log queue full: dropping',
      );
    }
    if (!lane.openMarker) {
      const marker: MissingFact = {
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'store-unavailable',
        count: 0,
        receivedAt: entry.receivedAt,
      };
      this.push(lane, {
        entry: marker,
        bytes: approxBytes(marker),
        resolve: noop,
        reject: noop,
        batch: null,
      });
      lane.openMarker = marker;
    }
    if (entry.kind === 'frame') lane.openMarker.count = (lane.openMarker.count ?? 0) + 1;
  }

  /** The entry's signal aborted: withdraw it if it has certainly not been sent, else let it settle. */
  private withdraw(lane: Lane, p: Pending): void {
    const batch = p.batch;
    if (p.withdrawn || (batch && (batch.maybeSent || batch.attempting))) return; // settles by the store
    p.withdrawn = true;
    if (batch) batch.items = batch.items.filter((item) => item !== p);
    this.settle(lane, p, null, withdrawnError());
    if (batch && batch.items.length === 0 && lane.inFlight === batch) {
      if (lane.retryTimer) clearTimeout(lane.retryTimer);
      lane.retryTimer = null;
      lane.inFlight = null;
      this.sendNext(lane);
    }
    this.settleIdle();
  }

  /** Resolve or reject one entry and release its room. */
  private settle(lane: Lane, p: Pending, value: Appended | null, err?: Error): void {
    lane.count--;
    lane.bytes -= p.bytes;
    if (p.onAbort) p.signal?.removeEventListener('abort', p.onAbort);
    if (value) p.resolve(value);
    else p.reject(err ?? withdrawnError());
    this.roomNow(lane);
  }

  /** Leave overflow once below the low-water mark of both bounds, and wake `whenRoom` waiters. */
  private roomNow(lane: Lane): void {
    const below = lane.count <= this.lowEntries && lane.bytes <= this.lowBytes;
    if (lane.overflow && !below && !this.closed) return;
    lane.overflow = false;
    const waiters = lane.roomWaiters.splice(0);
    for (const resolve of waiters) resolve();
  }

  private schedule(lane: Lane): void {
    if (lane.scheduled || lane.inFlight || lane.retryTimer || lane.waiting.length === lane.start) return;
    lane.scheduled = true;
    // A microtask later: everything appended in the same synchronous run joins one batch.
    queueMicrotask(() => {
      lane.scheduled = false;
      this.sendNext(lane);
    });
  }

  private sendNext(lane: Lane): void {
    if (this.closed || lane.inFlight || lane.retryTimer) return;
    const items: Pending[] = [];
    let bytes = 0;
    let fence: number | undefined;
    while (lane.start < lane.waiting.length && items.length < this.maxBatch) {
      const p = lane.waiting[lane.start]!;
      if (!p.withdrawn) {
        if (items.length > 0 && bytes + p.bytes > this.maxBatchBytes) break;
        // One token per batch: entries of another ownership term go in the next one.
        if (p.fence !== undefined && fence !== undefined && p.fence !== fence) break;
        fence ??= p.fence;
        items.push(p);
        bytes += p.bytes;
      }
      lane.start++;
    }
    if (lane.start > 4096 && lane.start * 2 > lane.waiting.length) {
      lane.waiting = lane.waiting.slice(lane.start);
      lane.start = 0;
    }
    // The marker is now frozen into this batch (a retry re-sends the same entries): later drops
    // start a new run with a new marker.
    if (lane.start === lane.waiting.length) lane.openMarker = null;
    if (items.length === 0) return;
    const batch: Batch = {
      id: { writerId: this.writerId, seq: ++this.seq },
      items,
      resetFact: storeResetFact(),
      maybeSent: false,
      attempting: false,
      ...(fence !== undefined ? { fence } : {}),
    };
    for (const p of items) p.batch = batch;
    lane.inFlight = batch;
    this.attempt(lane);
  }

  /**
   * Send the in-flight batch. After a failure that certainly never reached the store, entries
   * withdrawn meanwhile leave it; after an ambiguous one it is retried as is (same BatchId).
   */
  private attempt(lane: Lane): void {
    const batch = lane.inFlight;
    if (!batch || this.closed) return;
    batch.attempting = true;
    const entries = batch.items.map((p) => p.entry);
    const options = { batch: batch.id, floor: lane.floor, resetFact: batch.resetFact, fence: batch.fence };
    this.store.append(lane.capsule, entries, options).then(
      (result) => {
        batch.attempting = false;
        if (lane.inFlight !== batch) return; // closed meanwhile
        lane.inFlight = null;
        if (lane.lastError)
          this.logger?.info({ capsule: lane.capsule, failures: lane.attempt }, 'log store back');
        lane.attempt = 0;
        lane.lastError = null;
        lane.batches++;
        if (result.reset) this.onStoreReset(lane, batch, result);
        else this.resolveBatch(lane, batch, result);
        this.sendNext(lane);
        this.settleIdle();
      },
      (err: unknown) => {
        batch.attempting = false;
        if (lane.inFlight !== batch || this.closed) return;
        if (fenced(err) && batch.fence !== undefined) return this.onFencedBatch(lane, batch, batch.fence);
        if (!notSent(err)) batch.maybeSent = true;
        lane.failures++;
        lane.attempt++;
        lane.lastError = err instanceof Error ? err.message : String(err);
        const log = lane.attempt === 1 ? this.logger?.warn : this.logger?.debug;
        log?.call(
          this.logger,
          { capsule: lane.capsule, err: lane.lastError, queued: lane.count },
          'log append failed; retrying',
        );
        // Re-form a batch the store never saw: entries whose signal aborted meanwhile leave it.
        if (!batch.maybeSent) {
          for (const p of batch.items) if (p.signal?.aborted) p.onAbort?.();
          if (lane.inFlight !== batch) return; // emptied: withdraw() moved on
        }
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

  private resolveBatch(lane: Lane, batch: Batch, result: AppendResult): void {
    const offsets = result.offsets.length > 0 ? result.offsets : (result.appliedOffsets ?? []);
    if (offsets.length !== batch.items.length) {
      this.logger?.error(
        { capsule: lane.capsule, expected: batch.items.length, got: offsets.length },
        'store returned an unexpected number of offsets',
      );
    }
    lane.floor = Math.max(lane.floor, offsets[offsets.length - 1] ?? 0);
    batch.items.forEach((p, i) => this.settle(lane, p, { offset: offsets[i] ?? 0, epoch: result.epoch }));
  }

  /**
   * The store lost records and began a new epoch with only the reset fact. Frames queued here came
   * after the lost ones: they are discarded (the capsule's replay re-delivers what it still holds,
   * once the ingestor re-read its tail). Submissions and facts are re-queued, in order, first.
   */
  private onStoreReset(lane: Lane, batch: Batch, result: AppendResult): void {
    lane.floor = Math.max(lane.floor, ...result.offsets);
    this.logger?.warn({ capsule: lane.capsule, epoch: result.epoch }, 'log store regressed: new epoch');
    const discarded = new GatewayError('store_unavailable', 'log store was reset: frame discarded', {
      discarded: true,
    });
    const kept: Pending[] = [];
    for (const p of [...batch.items, ...lane.waiting.slice(lane.start)]) {
      if (p.withdrawn) continue;
      if (p.entry.kind === 'frame') {
        lane.discarded++;
        this.settle(lane, p, null, discarded);
      } else {
        p.batch = null;
        kept.push(p);
      }
    }
    lane.waiting = kept;
    lane.start = 0;
    for (const listener of this.resetListeners) {
      try {
        listener(lane.capsule);
      } catch (err) {
        this.logger?.error({ capsule: lane.capsule, err: String(err) }, 'onReset listener threw');
      }
    }
  }

  /**
   * Another replica took the capsule over (a newer token): this term's frames and facts will never
   * be appended (the new owner's replay restores what the capsule still holds); submissions are
   * re-queued, in order, without the token. Then the listeners stop the ingestion.
   */
  private onFencedBatch(lane: Lane, batch: Batch, fence: number): void {
    lane.inFlight = null;
    lane.attempt = 0;
    this.logger?.warn({ capsule: lane.capsule, fence }, 'append fenced: another replica owns the capsule');
    const refused = new GatewayError('store_unavailable', 'fenced: another replica owns this capsule', {
      fenced: true,
    });
    const kept: Pending[] = [];
    for (const p of [...batch.items, ...lane.waiting.slice(lane.start)]) {
      if (p.withdrawn) continue;
      if (p.fence !== undefined && p.fence <= fence) {
        lane.discarded++;
        this.settle(lane, p, null, refused);
      } else {
        p.batch = null;
        kept.push(p);
      }
    }
    lane.waiting = kept;
    lane.start = 0;
    lane.openMarker = null;
    for (const listener of this.fencedListeners) {
      try {
        listener(lane.capsule, fence);
      } catch (err) {
        this.logger?.error({ capsule: lane.capsule, err: String(err) }, 'onFenced listener threw');
      }
    }
    this.sendNext(lane);
    this.settleIdle();
  }

  private lane(capsule: string): Lane {
    let lane = this.lanes.get(capsule);
    if (!lane) {
      lane = {
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
        attempt: 0,
        openMarker: null,
        dropped: 0,
        discarded: 0,
        batches: 0,
        failures: 0,
        lastError: null,
      };
      this.lanes.set(capsule, lane);
      this.sweeper.track(capsule);
    }
    return lane;
  }

  private isIdle(capsule: string | null = null): boolean {
    if (this.closed) return true;
    if (capsule !== null) return (this.lanes.get(capsule)?.count ?? 0) === 0;
    for (const lane of this.lanes.values()) if (lane.count > 0) return false;
    return true;
  }

  private settleIdle(): void {
    if (this.idleWaiters.length === 0) return;
    const ready = this.idleWaiters.filter((w) => this.isIdle(w.capsule));
    if (ready.length === 0) return;
    this.idleWaiters = this.idleWaiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }
}
