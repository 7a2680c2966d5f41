/**
 * The only way ingestion writes to the log, in the order an entry lives through it:
 * 1. `write` / `append` queue it on its capsule's lane, in arrival order; the queue is bounded in
 *    bytes (`lane-room.ts`) and its overflow is recorded in the log as one `frames-possibly-missing`
 *    fact per stretch of drops.
 * 2. One batch per capsule is in flight at a time (group commit, `batch-sender.ts`, batches cut by
 *    `batch-forming.ts`), retried idempotently while the store is away.
 * 3. Every append carries a floor (the highest offset seen durable): a store that lost records starts
 *    a new epoch instead of re-using offsets, and `onReset` listeners hear of it.
 * 4. Every frame and fact carries the capsule owner's fencing token (src/fleet): a batch the store
 *    refuses as fenced comes from a replica that lost the capsule, so its frames and facts are dropped
 *    (the new owner's replay restores them), its submissions re-sent unfenced (any replica may record
 *    one), and `onFenced` listeners stop the ingestion (`epoch-and-fence.ts`).
 * 5. `flush` waits for it to be durable; `close` rejects what is left. Reads are the hub's.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { activeContext } from '../tracing.js';
import { GatewayError } from '../errors.js';
import { BatchSender } from './batch-sender.js';
import { LaneRoom, noop, withdrawnError } from './lane-room.js';
import type { LogEntry } from './record.js';
import { RetentionSweeper } from './retention-sweeper.js';
import type { LogStore } from './store.js';
import { approxBytes, Lane, type Appended, type Pending } from './writer-lane.js';
import { writerSettings, type LogWriterOptions, type WriterSettings } from './writer-options.js';
import { laneStats, totalStats, type WriterStats } from './writer-stats.js';

export type { LogWriterOptions } from './writer-options.js';
export type { WriterStats } from './writer-stats.js';
export type { Appended } from './writer-lane.js';

export class LogWriter {
  readonly writerId = randomUUID();
  private readonly lanes = new Map<string, Lane>();
  /** flush() callers: everything (capsule null) or one capsule's lane. */
  private idleWaiters: { capsule: string | null; resolve: () => void }[] = [];
  private readonly resetListeners = new Set<(capsule: string) => void>();
  private readonly fencedListeners = new Set<(capsule: string, fence: number) => void>();
  private closed = false;
  private readonly settings: WriterSettings;
  private readonly room: LaneRoom;
  private readonly sender: BatchSender;
  private readonly sweeper: RetentionSweeper;
  private readonly logger: Logger | undefined;

  constructor(store: LogStore, options: LogWriterOptions = {}) {
    this.settings = writerSettings(options);
    this.logger = options.logger;
    this.room = new LaneRoom(
      this.settings.queue,
      () => this.closed,
      (lane) => this.sender.schedule(lane),
      this.logger,
    );
    this.sender = new BatchSender({
      store,
      writerId: this.writerId,
      settings: this.settings,
      room: this.room,
      closed: () => this.closed,
      resetListeners: this.resetListeners,
      fencedListeners: this.fencedListeners,
      settleIdle: () => this.settleIdle(),
      logger: this.logger,
    });
    this.sweeper = new RetentionSweeper(store, this.settings.trimIntervalMs, this.logger);
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
    if (this.room.full(lane, bytes)) {
      if (entry.kind === 'submission')
        this.logger?.error({ capsule }, 'log queue full: submission not recorded');
      else this.room.drop(lane, entry);
      return false;
    }
    this.room.push(lane, { entry, bytes, resolve: noop, reject: noop, batch: null });
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

  private enqueue(capsule: string, entry: LogEntry, signal?: AbortSignal): Promise<Appended> {
    if (this.closed) return Promise.reject(new GatewayError('shutting_down', 'log writer closed'));
    if (signal?.aborted) return Promise.reject(withdrawnError());
    const lane = this.lane(capsule);
    const bytes = approxBytes(entry);
    if (this.room.full(lane, bytes)) {
      if (entry.kind === 'submission') {
        return Promise.reject(
          new GatewayError('store_unavailable', 'log store unavailable: submission not recorded'),
        );
      }
      this.room.drop(lane, entry);
      return Promise.reject(
        new GatewayError('store_unavailable', 'log queue full: entry dropped', { dropped: true }),
      );
    }
    return new Promise<Appended>((resolve, reject) => {
      const pending: Pending = { entry, bytes, resolve, reject, batch: null };
      const trace = activeContext();
      // Only what a traced caller appends (a submission, a hand-off fact), never a plain frame.
      if (trace && entry.kind !== 'frame') pending.trace = trace;
      if (signal) {
        pending.signal = signal;
        pending.onAbort = () => this.sender.withdraw(lane, pending);
        signal.addEventListener('abort', pending.onAbort, { once: true });
      }
      this.room.push(lane, pending);
    });
  }

  private lane(capsule: string): Lane {
    let lane = this.lanes.get(capsule);
    if (!lane) {
      lane = new Lane(capsule);
      this.lanes.set(capsule, lane);
      this.sweeper.track(capsule);
    }
    return lane;
  }

  // What can go wrong between the queue and the store, and who hears of it.

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
    // The same replica's previous term, with nobody in between: its queued entries are still true.
    this.lane(capsule).setFence(fence, options.adopt);
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
    if (!lane.overflowing || this.closed) return Promise.resolve();
    return lane.waitForRoom();
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
    // A lingering batch (a busy capsule's group commit) goes now: the caller waits for it.
    const lanes = key === null ? [...this.lanes.values()] : [this.lanes.get(key)];
    for (const lane of lanes) if (lane) this.sender.cutLinger(lane);
    return new Promise((resolve) => this.idleWaiters.push({ capsule: key, resolve }));
  }

  /** Stop: pending entries are rejected with `shutting_down`. Flush first to drain. */
  async close(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    const err = new GatewayError('shutting_down', 'log writer closed');
    for (const lane of this.lanes.values()) {
      for (const p of lane.clear()) if (!p.withdrawn) this.room.settle(lane, p, null, err);
      this.room.roomNow(lane);
    }
    this.settleIdle();
  }

  /** Totals over all capsules. */
  stats(): WriterStats {
    return totalStats(this.lanes.values());
  }

  /** One capsule's figures (undefined before its first entry). */
  capsuleStats(capsule: string): WriterStats | undefined {
    const lane = this.lanes.get(capsule);
    return lane ? laneStats(lane) : undefined;
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
