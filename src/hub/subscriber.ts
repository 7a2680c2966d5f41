/**
 * One subscription: catch-up from the store in pages, then live batches from its channel, delivered
 * strictly in offset order, one batch at a time, with a bounded queue. The channel owns the store tail.
 */
import type { Logger } from 'pino';
import type { LogRecord } from '../log/record.js';
import type { LogPosition, ReadResult } from '../log/store.js';
import { isStoreReset } from '../core/store-reset.js';
import type { SubscribeOptions, Subscription, SubscriptionEnd } from '../core/types.js';
import type { CapsuleChannel, ChannelListener } from './capsule-channel.js';

export interface SubscriberSettings {
  pageSize: number;
  maxQueuedRecords: number;
  logger: Logger;
}

export class Subscriber implements ChannelListener, Subscription {
  readonly kind = 'subscriber' as const;
  /**
   * Highest offset handed to onRecords (or the `after` asked for). Initialised with a number, not
   * left declared: an ES2022 class field without an initialiser starts as `undefined`, so V8 keeps
   * it as a tagged field, and every store of an offset (a double above 2^31) then allocated a
   * 16-byte box, once per subscriber per batch (a twentieth of the gateway's garbage at 100 x 500).
   */
  private cursor = 0;
  private readonly queue: (readonly LogRecord[])[] = [];
  private queued = 0;
  /** True once a store read came back empty or a live batch followed on directly: we are live. */
  private caughtUp = false;
  private started = false;
  private pumping = false;
  private ended = false;
  /** The first read may start past `after` (the caller reported that gap); later jumps may not. */
  private firstRead = true;
  private readonly maxQueued: number;
  private readonly onAbort = (): void => this.end('closed');
  readonly surface: string | undefined;

  constructor(
    private readonly channel: CapsuleChannel,
    private readonly options: SubscribeOptions,
    private readonly settings: SubscriberSettings,
  ) {
    this.cursor = options.after;
    this.maxQueued = options.maxQueuedRecords ?? settings.maxQueuedRecords;
    this.surface = options.surface;
  }

  /** Join the live set first, then catch up: whatever the catch-up reads miss arrives live. */
  start(): void {
    const { signal } = this.options;
    // Join even when already aborted: leaving then schedules the channel's dissolve as usual.
    this.channel.join(this);
    if (signal?.aborted) {
      queueMicrotask(() => this.end('closed'));
      return;
    }
    signal?.addEventListener('abort', this.onAbort, { once: true });
    this.channel.ready.then(
      () => {
        if (this.ended) return;
        this.started = true;
        this.kick();
      },
      () => this.end('store_error'),
    );
  }

  close(): void {
    this.end('closed');
  }

  push(records: readonly LogRecord[]): void {
    if (this.ended) return;
    if (this.deliverNow(records)) return;
    if (this.queued + records.length > this.maxQueued) {
      if (this.caughtUp) {
        // Live and unable to keep up: end it (it resumes from its cursor), never skip silently.
        this.end('slow');
        return;
      }
      // Still catching up from the store, which holds these records too: drop the live buffer and
      // let the catch-up (and hole filling) read them when this subscriber gets there.
      this.queue.length = 0;
      this.queued = 0;
      return;
    }
    this.queue.push(records);
    this.queued += records.length;
    this.kick();
  }

  /**
   * The live steady state, without the pump: a caught-up subscriber with nothing queued takes a batch
   * that continues its cursor at once, synchronously (one call per subscriber per batch; the pump's
   * promise round trips were a visible share of the CPU per delivered event at a thousand
   * subscribers). Anything else (a hole, a busy pump, backpressure) goes through the queue.
   */
  private deliverNow(records: readonly LogRecord[]): boolean {
    if (!this.caughtUp || !this.started || this.pumping || this.queue.length > 0) return false;
    // Offsets read once each (a read can cost a boxed number per subscriber per batch: see feed.ts).
    const n = records.length;
    const last = records[n - 1];
    if (!last) return true;
    const lastOffset = last.offset;
    const cursor = this.cursor;
    if (lastOffset <= cursor) return true; // nothing after the cursor
    const fresh = n === 1 ? records : this.after(records, cursor);
    const firstOffset = n === 1 ? lastOffset : fresh[0]!.offset;
    if (firstOffset !== cursor + 1) return false;
    this.cursor = lastOffset;
    let pending: void | Promise<void>;
    try {
      pending = this.options.onRecords(fresh);
    } catch (err) {
      this.onRecordsFailed(err);
      return true;
    }
    if (pending) this.holdUntil(pending);
    return true;
  }

  /**
   * The listener asked us to wait (its client is behind): hold later batches in the queue. Its own
   * method so that deliverNow, called per subscriber per batch, creates no closure (a closure over
   * `this` allocates a context on every call, used or not).
   */
  private holdUntil(pending: Promise<void>): void {
    this.pumping = true;
    pending.then(
      () => {
        this.pumping = false;
        this.kick();
      },
      (err: unknown) => {
        this.pumping = false;
        this.onRecordsFailed(err);
      },
    );
  }

  reset(_position: LogPosition): void {
    this.end('store_error');
  }

  shutdown(): void {
    this.end('shutdown');
  }

  private end(reason: SubscriptionEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.queue.length = 0;
    this.queued = 0;
    this.options.signal?.removeEventListener('abort', this.onAbort);
    this.channel.leave(this);
    try {
      this.options.onEnd(reason);
    } catch (err) {
      this.settings.logger.error({ err, capsule: this.channel.capsule }, 'hub: onEnd threw');
    }
  }

  private kick(): void {
    if (this.pumping || !this.started || this.ended) return;
    this.pumping = true;
    void this.pump();
  }

  /**
   * The one delivery loop of this subscriber (so onRecords never runs concurrently). `pumping` is
   * cleared synchronously with the decision to stop, so a push racing the exit always restarts it.
   */
  private async pump(): Promise<void> {
    for (;;) {
      if (this.ended) {
        this.pumping = false;
        return;
      }
      const batch = this.queue[0];
      if (!batch) {
        if (this.caughtUp) {
          this.pumping = false;
          return;
        }
        const page = await this.read(this.cursor, this.settings.pageSize);
        if (!page) continue; // ended
        if (page.records.length === 0) this.caughtUp = true;
        else await this.deliver(page.records);
        continue;
      }
      const fresh = this.after(batch, this.cursor);
      const first = fresh[0];
      if (!first) {
        this.dequeue(batch);
        continue;
      }
      if (first.offset > this.cursor + 1) {
        // A hole between what we delivered and this batch (catch-up still running, or the live
        // buffer was dropped): fill it from the store, never skip it.
        const holeSize = first.offset - 1 - this.cursor;
        const page = await this.read(this.cursor, Math.min(this.settings.pageSize, holeSize));
        if (!page) continue;
        const filler = page.records.filter((r) => r.offset < first.offset);
        if (filler.length > 0) {
          await this.deliver(filler);
          continue;
        }
        if (this.queue[0] !== batch) continue; // the queue changed while we read
        // Retention trimmed the hole before this subscriber read it; read() ended it as slow.
        if (this.ended) continue;
      }
      this.dequeue(batch);
      this.caughtUp = true;
      await this.deliver(fresh);
    }
  }

  private dequeue(batch: readonly LogRecord[]): void {
    this.queue.shift();
    this.queued -= batch.length;
  }

  /** Records of `batch` after `cursor`: the same array when all are new (the common live case). */
  private after(batch: readonly LogRecord[], cursor: number): readonly LogRecord[] {
    const head = batch[0];
    if (!head || head.offset > cursor) return batch;
    return recordsAfter(batch, cursor);
  }

  /** A store read; null when the subscription ended (store error, or the log went backwards). */
  private async read(after: number, limit: number): Promise<ReadResult | null> {
    let page: ReadResult;
    const generation = this.channel.generation;
    try {
      // Memory near the head (empty at the head: live batches follow), else one shared store read.
      page = await this.channel.read(after, limit, true);
    } catch (err) {
      this.settings.logger.warn({ err, capsule: this.channel.capsule }, 'hub: catch-up read failed');
      this.end('store_error');
      return null;
    }
    if (this.ended) return null;
    const firstRead = this.firstRead;
    this.firstRead = false;
    // Offsets never repeat across epochs, so a new epoch is no reason to stop: this subscriber reads
    // on from its cursor and meets the store-reset fact. A log that went backwards instead ends
    // every listener of the channel (this one included) through observe().
    const consistent = this.channel.observe(page.position, generation);
    if (this.ended) return null;
    if (!consistent) {
      if (!this.channel.running) {
        this.end('store_error');
        return null;
      }
      // A read started before the channel entered a newer epoch: read again rather than trust it.
      return this.read(after, limit);
    }
    const first = page.records[0];
    const firstOffset = first?.offset ?? page.position.first;
    // Cursor 0 holds nothing (a log starts at a time floor, far above 1): nothing can be missed.
    if (!firstRead && after > 0 && firstOffset > after + 1 && !(first && isStoreReset(first))) {
      // Retention trimmed records this subscriber had not read yet: it fell too far behind. End it;
      // it resumes from its cursor and its surface reports the gap (never skip silently).
      this.settings.logger.info(
        { capsule: this.channel.capsule, cursor: after, first: firstOffset },
        'hub: subscriber fell behind retention',
      );
      this.end('slow');
      return null;
    }
    return page;
  }

  private async deliver(records: readonly LogRecord[]): Promise<void> {
    const last = records[records.length - 1];
    if (!last || this.ended) return;
    this.cursor = last.offset;
    try {
      await this.options.onRecords(records);
    } catch (err) {
      this.onRecordsFailed(err);
    }
  }

  /** The listener threw (or its wait rejected): this subscription ends. */
  private onRecordsFailed(err: unknown): void {
    this.settings.logger.warn({ err, capsule: this.channel.capsule }, 'hub: onRecords failed');
    this.end('closed');
  }
}

/** The records past `cursor`, in a loop of their own: no closure (and context) on the live path. */
const recordsAfter = (batch: readonly LogRecord[], cursor: number): LogRecord[] => {
  const out: LogRecord[] = [];
  for (const r of batch) if (r.offset > cursor) out.push(r);
  return out;
};
