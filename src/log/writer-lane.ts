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

/**
 * One capsule's lane. Its fields change only through these methods, each named for the moment in an
 * entry's life it records; the writer's other files read the figures and ask for the changes.
 */
export class Lane {
  /** Waiting entries live in waiting[start..]: taking a batch is O(batch), not O(queue). */
  private waiting: Pending[] = [];
  private start = 0;
  private queuedEntries = 0;
  private queuedBytes = 0;
  private highestDurable = 0;
  private stamp: number | undefined;
  private refusing = false;
  private roomWaiters: (() => void)[] = [];
  private sending: Batch | null = null;
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private lingerTimer: NodeJS.Timeout | null = null;
  private attempts = 0;
  private marker: MissingFact | null = null;
  private droppedEntries = 0;
  private discardedFrames = 0;
  private durableBatches = 0;
  private failedCalls = 0;
  private lastFailure: string | null = null;
  /** Group commit of a busy capsule (`batch-linger.ts` keeps its figures). */
  readonly linger: LingerState = newLingerState();

  constructor(readonly capsule: string) {}

  // The figures.

  /** Entries queued or in flight (withdrawn ones no longer count). */
  get count(): number {
    return this.queuedEntries;
  }
  /** Approximate bytes queued or in flight. */
  get bytes(): number {
    return this.queuedBytes;
  }
  /** The highest offset seen durable in this capsule's log: the store fences anything below it. */
  get floor(): number {
    return this.highestDurable;
  }
  /** The fencing token stamped on frames and facts queued now (src/fleet); undefined = unfenced. */
  get fence(): number | undefined {
    return this.stamp;
  }
  /** Refusing entries since the queue overflowed, until it is below the low-water mark. */
  get overflowing(): boolean {
    return this.refusing;
  }
  /** The batch sent or being retried (one at a time, so entries reach the store in order). */
  get inFlight(): Batch | null {
    return this.sending;
  }
  /** Failed attempts in a row of the batch in flight. */
  get attempt(): number {
    return this.attempts;
  }
  /** The fact counting the current run of dropped entries, while nothing has been queued after it. */
  get openMarker(): MissingFact | null {
    return this.marker;
  }
  get dropped(): number {
    return this.droppedEntries;
  }
  get discarded(): number {
    return this.discardedFrames;
  }
  get batches(): number {
    return this.durableBatches;
  }
  get failures(): number {
    return this.failedCalls;
  }
  /** The last store failure, cleared when a batch succeeds again. */
  get lastError(): string | null {
    return this.lastFailure;
  }
  /** Entries waiting to be taken into a batch. */
  get waitingCount(): number {
    return this.waiting.length - this.start;
  }
  /** Slots the queue's array still holds, taken entries included (they should not linger there). */
  get retainedCount(): number {
    return this.waiting.length;
  }
  /** A batch is in flight, waiting to be retried or lingering: the next one waits for it. */
  get busy(): boolean {
    return this.sending !== null || this.retryTimer !== null || this.lingerTimer !== null;
  }

  // Queueing and taking.

  /** Queue an entry, stamped with the current fence unless `unfenced`; a new entry closes a run of drops. */
  enqueue(p: Pending, unfenced = false): void {
    if (!unfenced && this.stamp !== undefined) p.fence = this.stamp;
    this.waiting.push(p);
    this.queuedEntries++;
    this.queuedBytes += p.bytes;
    this.marker = null;
  }

  /** The next waiting entry, not taken yet. */
  peek(): Pending | undefined {
    return this.start < this.waiting.length ? this.waiting[this.start] : undefined;
  }

  /** Take the entry `peek` returned off the queue. */
  advance(): void {
    this.start++;
  }

  /** After a batch was taken: release what it took from the queue, and freeze the open run of drops. */
  releaseTaken(): void {
    // Taken entries leave the array as soon as it is drained (every batch, unless a backlog is
    // queued): held there, each entry, its batch and its frame lived until 4,096 more were taken,
    // long enough to be promoted to V8's old space (the bulk of what a scavenge copied at 500
    // frames/s on Redis). A backlog is compacted now and then instead, amortised O(1) per entry.
    if (this.start === this.waiting.length) {
      this.waiting.length = 0;
      this.start = 0;
    } else if (this.start > 4096 && this.start * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.start);
      this.start = 0;
    }
    // The marker is now frozen into the batch (a retry re-sends the same entries): later drops
    // start a new run with a new marker.
    if (this.start === this.waiting.length) this.marker = null;
  }

  /**
   * After the store refused `batch` (a new epoch, or fenced): the entries `discard` picks, in the
   * batch and the queue, are counted as discarded and returned for the caller to settle; the others
   * are queued again, in order, first. `closeRun`: later drops start a new marker.
   */
  sift(batch: Batch, discard: (p: Pending) => boolean, closeRun: boolean): Pending[] {
    const kept: Pending[] = [];
    const gone: Pending[] = [];
    for (const p of [...batch.items, ...this.waiting.slice(this.start)]) {
      if (p.withdrawn) continue;
      if (discard(p)) {
        this.discardedFrames++;
        gone.push(p);
      } else {
        p.batch = null;
        kept.push(p);
      }
    }
    this.waiting = kept;
    this.start = 0;
    if (closeRun) this.marker = null;
    return gone;
  }

  /** Closing: no timer left, nothing queued or in flight; returns what was (to be rejected). */
  clear(): Pending[] {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.retryTimer = this.lingerTimer = null;
    const left = [...this.waiting.slice(this.start), ...(this.sending?.items ?? [])];
    this.waiting = [];
    this.start = 0;
    this.sending = null;
    return left;
  }

  // Room.

  /** An entry settled: its room is free again. */
  release(p: Pending): void {
    this.queuedEntries--;
    this.queuedBytes -= p.bytes;
  }

  /** One more entry dropped; true when this drop began an overflow (the queue refuses from now on). */
  noteDrop(): boolean {
    this.droppedEntries++;
    if (this.refusing) return false;
    this.refusing = true;
    return true;
  }

  /** The fact that counts the run of drops beginning now (queued just before). */
  openRun(marker: MissingFact): void {
    this.marker = marker;
  }

  /** Below the low-water mark (or closing): accept entries again and wake `whenRoom` waiters. */
  leaveOverflow(): void {
    this.refusing = false;
    const waiters = this.roomWaiters.splice(0);
    for (const resolve of waiters) resolve();
  }

  /** Resolves once the lane leaves overflow. */
  waitForRoom(): Promise<void> {
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  // Fencing and the floor.

  /**
   * Stamp frames and facts queued from now on with `fence`. `adopt`: the same replica's previous
   * term, with nobody in between: its queued entries (stamped `adopt`) are still true, so they carry
   * the new token too.
   */
  setFence(fence: number | undefined, adopt?: number): void {
    this.stamp = fence;
    if (adopt === undefined || fence === undefined) return;
    for (let i = this.start; i < this.waiting.length; i++) {
      const p = this.waiting[i]!;
      if (p.fence === adopt) p.fence = fence;
    }
    // A retry of the batch in flight is safe under the new token: the dedup check comes first.
    if (this.sending && this.sending.fence === adopt) {
      this.sending.fence = fence;
      for (const p of this.sending.items) if (p.fence === adopt) p.fence = fence;
    }
  }

  /** Offsets seen durable: the floor rises to the highest. */
  raiseFloor(...offsets: number[]): void {
    this.highestDurable = Math.max(this.highestDurable, ...offsets);
  }

  // The send loop's moments.

  /** Run `send` a microtask later, once however often asked meanwhile. */
  scheduleOnce(send: () => void): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      send();
    });
  }

  /** A busy capsule's next batch waits `ms` (group commit), then `send` runs. */
  lingerThen(ms: number, send: () => void): void {
    this.lingerTimer = setTimeout(() => {
      this.lingerTimer = null;
      send();
    }, ms);
  }

  /** Stop a lingering wait; true when one was cut (the caller sends now). */
  cutLinger(): boolean {
    if (!this.lingerTimer) return false;
    clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    return true;
  }

  /** `batch` is sent. */
  begin(batch: Batch): void {
    this.sending = batch;
  }

  /** The batch in flight is durable (or began a new epoch): the next may go; failures are forgotten. */
  landed(): void {
    this.sending = null;
    this.attempts = 0;
    this.lastFailure = null;
    this.durableBatches++;
  }

  /** The store refused the batch in flight for good (fenced): the next may go. */
  refused(): void {
    this.sending = null;
    this.attempts = 0;
  }

  /** Every entry of the batch in flight was withdrawn before it was sent: nothing is left to retry. */
  abandon(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.sending = null;
  }

  /** A store call failed; returns the attempt it was (1 = the first failure in a row). */
  failed(message: string): number {
    this.failedCalls++;
    this.lastFailure = message;
    return ++this.attempts;
  }

  /** Retry the batch in flight after `ms`. */
  retryAfter(ms: number, retry: () => void): void {
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      retry();
    }, ms);
  }
}

/** A cheap size estimate of an encoded entry: its variable text plus the JSON around it. */
export const approxBytes = (entry: LogEntry): number =>
  entry.kind === 'frame'
    ? entry.data.length + 120
    : entry.kind === 'submission'
      ? entry.text.length + 300 + (entry.meta ? JSON.stringify(entry.meta).length : 0)
      : 200;
