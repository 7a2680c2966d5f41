/**
 * The BeeOS live feed of one capsule in this process: ONE hub subscription, whatever the number of
 * channel streams, dispatching each record by its context to the shared projections of that
 * context's channels (records it cannot attribute go to every projection, which decide). A shared
 * projection projects a record once, encodes each envelope once, and hands the same Buffers to
 * every listener, which filters only by what differs (`since`, `include_deltas`).
 *
 * A listener replays on its own up to the feed's position (channel-stream.ts), closing the last
 * stretch synchronously from the feed's ring of recent records, then joins the projection whose
 * state equals its own (`shareKey`), or makes its projector a new shared one.
 *
 * When its hub subscription ends (store error, or the log went backwards: the hub ends its listeners
 * then), the feed checks its cursor against the log before following it again: a cursor beyond the
 * head, trimmed, or of another epoch than the feed followed means its projections describe records
 * the log no longer has (or never will have: a cursor above the head would wait for offsets that
 * come back with other content). It then drops its streams, without `end` (not terminal: each client
 * reconnects with since and replays the log as it is now), and goes away with its projections.
 */
import type { Logger } from 'pino';
import type { GatewayCore, Subscription, SubscriptionEnd } from '../../src/core/types.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import { ContextTracker } from '../../src/log/frame-view.js';
import type { LogRecord } from '../../src/log/record.js';
import type { ChannelListener } from './channel-listener.js';
import type { ChannelProjector } from './projection.js';
import { SharedProjection } from './shared-projection.js';
import { beeosMeta } from './records.js';

/** Recent records kept so a listener can reach the feed's position without another read. */
const RING = 4096;
const RETRY_MS = [100, 500, 1_000, 2_000, 5_000];

/** Process-wide counts of feed resumes and resets (beeosFeedStats). */
export const feedCounters = { resumes: 0, resets: 0 };

export class CapsuleFeed {
  /** Every record up to here has been dispatched. */
  cursor: number;
  private readonly ring: LogRecord[] = [];
  /** The ring holds every record after this offset (up to `cursor`). */
  private ringFrom: number;
  private readonly tracker = new ContextTracker();
  private readonly byContext = new Map<string, Set<SharedProjection>>();
  private readonly byChannel = new Map<string, SharedProjection[]>();
  private readonly all = new Set<SharedProjection>();
  /** Listeners still waiting for their replay_complete. */
  private readonly pendingReplay = new Map<ChannelListener, SharedProjection>();
  /** Listeners replaying on their own (they keep the feed alive). */
  private readonly replaying = new Set<ChannelListener>();
  private subscription: Subscription | null = null;
  private retry: NodeJS.Timeout | null = null;
  private failures = 0;
  closed = false;

  /** The log epoch the cursor belongs to; null after following a store reset live (learnt on resume). */
  private epoch: number | null;

  constructor(
    private readonly core: GatewayCore,
    readonly capsule: string,
    after: number,
    epoch: number,
    private readonly logger: Logger,
    private readonly onIdle: () => void,
    private readonly observers: ((records: readonly LogRecord[], before: number) => void)[],
  ) {
    this.cursor = after;
    this.ringFrom = after;
    this.epoch = epoch;
    this.subscribe();
  }

  private subscribe(): void {
    const abort = new AbortController();
    const sub = this.core.subscribe(this.capsule, {
      after: this.cursor,
      surface: 'beeos',
      onRecords: (records) => this.dispatch(records),
      onEnd: (reason) => this.onEnd(reason, sub),
      signal: abort.signal,
    });
    this.subscription = sub;
  }

  private onEnd(reason: SubscriptionEnd, sub: Subscription): void {
    if (this.subscription !== sub || this.closed) return;
    this.subscription = null;
    if (reason === 'closed') return;
    if (reason === 'shutdown') {
      for (const p of this.all) for (const l of p.listeners) l.end('stream_closed', p.projector.latestOffset);
      return this.close();
    }
    // slow / store error: the feed resumes from its cursor, once the log is known to continue it.
    this.logger.info({ capsule: this.capsule, reason, cursor: this.cursor }, 'beeos: live feed resumes');
    this.scheduleResume();
  }

  private scheduleResume(): void {
    const delay = RETRY_MS[Math.min(this.failures++, RETRY_MS.length - 1)] ?? 5_000;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.resume();
    }, delay);
  }

  /**
   * Follow the log again from the cursor if the log still continues it; else drop every stream.
   * (The hub ends its listeners when the log went backwards and would serve a new subscription
   * from an offset above its head: records that never come, or come back with other content.)
   */
  private async resume(): Promise<void> {
    if (this.closed) return;
    let checked;
    try {
      checked = await this.core.cursorStatus(this.capsule, this.cursor);
    } catch (err) {
      this.logger.warn({ err, capsule: this.capsule }, 'beeos: live feed cannot check its cursor; retrying');
      if (!this.closed) this.scheduleResume();
      return;
    }
    if (this.closed) return;
    const { status, position } = checked;
    if (status !== 'ok' || (this.epoch !== null && position.epoch !== this.epoch)) {
      this.logger.warn(
        { capsule: this.capsule, cursor: this.cursor, status, epoch: this.epoch, position },
        'beeos: the log no longer continues the live feed; dropping its streams',
      );
      return this.reset();
    }
    this.epoch = position.epoch;
    feedCounters.resumes++;
    this.subscribe();
  }

  /** Drop every stream of the feed (they reconnect with since) and its projections with it. */
  private reset(): void {
    feedCounters.resets++;
    const listeners = [...this.replaying, ...this.pendingReplay.keys()];
    for (const p of this.all) listeners.push(...p.listeners);
    this.close();
    for (const l of listeners) l.drop();
    this.all.clear();
    this.byContext.clear();
    this.byChannel.clear();
    this.pendingReplay.clear();
  }

  /** Synchronous by design: every projection and listener moves in one step per batch. */
  private dispatch(records: readonly LogRecord[]): void {
    if (this.closed) return;
    this.failures = 0;
    const before = this.cursor;
    for (const record of records) {
      if (record.offset <= this.cursor) continue;
      const context = this.contextOf(record);
      const targets = context === null ? this.all : this.byContext.get(context);
      if (targets) for (const p of [...targets]) if (!p.ended) this.feed(p, record);
      // A new epoch followed in order: its number is learnt when the feed next checks the log.
      if (isStoreReset(record)) this.epoch = null;
      this.cursor = record.offset;
      this.ring.push(record);
    }
    if (this.ring.length > RING * 2) {
      const drop = this.ring.length - RING;
      this.ringFrom = this.ring[drop - 1]?.offset ?? this.ringFrom;
      this.ring.splice(0, drop);
    }
    for (const [l, p] of this.pendingReplay) {
      l.passed(this.cursor, p.projector.latestOffset);
      if (l.replayDone || l.ended) this.pendingReplay.delete(l);
    }
    for (const observe of this.observers) observe(records, before);
  }

  private feed(p: SharedProjection, record: LogRecord): void {
    p.onRecord(record);
    if (p.ended || p.listeners.size === 0) this.remove(p);
  }

  /** The context a record belongs to, with the same links the projector makes; null: unknown. */
  private contextOf(record: LogRecord): string | null {
    if (record.kind === 'submission') {
      const meta = beeosMeta(record);
      if (meta?.op === 'outcome' && meta.outcome === 'accepted' && meta.taskId)
        this.tracker.link(meta.taskId, record.contextId);
      return record.contextId;
    }
    return this.tracker.contextOf(record);
  }

  /** Records after `after` up to the cursor from the ring, or null when the ring no longer has them. */
  recent(after: number): readonly LogRecord[] | null {
    if (after < this.ringFrom) return null;
    if (after >= this.cursor) return [];
    let lo = 0;
    let hi = this.ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.ring[mid]?.offset ?? 0) <= after) lo = mid + 1;
      else hi = mid;
    }
    return this.ring.slice(lo);
  }

  /** A listener starts replaying on its own: keep the feed (and its ring) running meanwhile. */
  hold(listener: ChannelListener): () => void {
    this.replaying.add(listener);
    return () => {
      if (this.replaying.delete(listener)) this.maybeIdle();
    };
  }

  /**
   * Join `listener`, whose own projector has projected every record up to `cursor` (synchronously
   * with this call), to the shared projection in the same state, or share its projector.
   */
  join(listener: ChannelListener, channelId: string, contextId: string, projector: ChannelProjector): void {
    const key = projector.shareKey();
    const list = this.byChannel.get(channelId) ?? [];
    let shared = list.find((p) => !p.ended && p.projector.shareKey() === key);
    if (!shared) {
      shared = new SharedProjection(channelId, contextId, projector);
      list.push(shared);
      this.byChannel.set(channelId, list);
      let set = this.byContext.get(contextId);
      if (!set) this.byContext.set(contextId, (set = new Set()));
      set.add(shared);
      this.all.add(shared);
    }
    const p = shared;
    p.listeners.add(listener);
    listener.latest = () => p.projector.latestOffset;
    if (!listener.replayDone) this.pendingReplay.set(listener, p);
    listener.onClose(() => {
      p.listeners.delete(listener);
      this.pendingReplay.delete(listener);
      if (p.listeners.size === 0) this.remove(p);
    });
  }

  private remove(p: SharedProjection): void {
    if (!this.all.delete(p)) return;
    for (const l of p.listeners) this.pendingReplay.delete(l);
    this.byContext.get(p.contextId)?.delete(p);
    if (this.byContext.get(p.contextId)?.size === 0) this.byContext.delete(p.contextId);
    const list = this.byChannel.get(p.channelId)?.filter((q) => q !== p) ?? [];
    if (list.length > 0) this.byChannel.set(p.channelId, list);
    else this.byChannel.delete(p.channelId);
    this.maybeIdle();
  }

  private maybeIdle(): void {
    if (this.all.size === 0 && this.replaying.size === 0) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.subscription?.close();
    this.subscription = null;
    this.onIdle();
  }

  /** Shared projections and listeners (tests, metrics). */
  stats(): { projections: number; listeners: number; replaying: number; subscribed: boolean } {
    let listeners = 0;
    for (const p of this.all) listeners += p.listeners.size;
    return {
      projections: this.all.size,
      listeners,
      replaying: this.replaying.size,
      subscribed: this.subscription !== null,
    };
  }
}
