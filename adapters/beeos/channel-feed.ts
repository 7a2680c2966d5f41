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
 */
import type { Logger } from 'pino';
import type { GatewayCore, Subscription, SubscriptionEnd } from '../../src/core/types.js';
import { ContextTracker } from '../../src/log/frame-view.js';
import type { LogRecord } from '../../src/log/record.js';
import type { ChannelListener } from './channel-listener.js';
import { encodeStep } from './channel-listener.js';
import type { ChannelProjector } from './projection.js';
import { beeosMeta } from './records.js';

/** Recent records kept so a listener can reach the feed's position without another read. */
const RING = 4096;
const RETRY_MS = [100, 500, 1_000, 2_000, 5_000];

export class SharedProjection {
  readonly listeners = new Set<ChannelListener>();
  ended = false;

  constructor(
    readonly channelId: string,
    readonly contextId: string,
    readonly projector: ChannelProjector,
  ) {}

  onRecord(record: LogRecord): void {
    const before = this.projector.latestOffset;
    const step = this.projector.project(record);
    const encoded = step.envelopes.length > 0 ? encodeStep(step) : [];
    const after = this.projector.latestOffset;
    for (const l of this.listeners) l.onRecord(record, step, encoded, before, after);
    if (step.end) this.ended = true;
  }
}

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
  private syncing = 0;
  private subscription: Subscription | null = null;
  private retry: NodeJS.Timeout | null = null;
  private failures = 0;
  closed = false;

  constructor(
    private readonly core: GatewayCore,
    readonly capsule: string,
    after: number,
    private readonly logger: Logger,
    private readonly onIdle: () => void,
    private readonly observers: ((records: readonly LogRecord[], before: number) => void)[],
  ) {
    this.cursor = after;
    this.ringFrom = after;
    this.subscribe();
  }

  private subscribe(): void {
    const abort = new AbortController();
    const sub = this.core.subscribe(this.capsule, {
      after: this.cursor,
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
    // slow / store error: the feed resumes from its cursor; its listeners never notice.
    const delay = RETRY_MS[Math.min(this.failures++, RETRY_MS.length - 1)] ?? 5_000;
    this.logger.info({ capsule: this.capsule, reason, cursor: this.cursor }, 'beeos: live feed resumes');
    this.retry = setTimeout(() => {
      this.retry = null;
      if (!this.closed) this.subscribe();
    }, delay);
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
  hold(): () => void {
    this.syncing++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.syncing--;
      this.maybeIdle();
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
    if (this.all.size === 0 && this.syncing === 0) this.close();
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
  stats(): { projections: number; listeners: number } {
    let listeners = 0;
    for (const p of this.all) listeners += p.listeners.size;
    return { projections: this.all.size, listeners };
  }
}

/** The feeds of this process's BeeOS surface, one per capsule with live channel streams. */
export class ChannelFeeds {
  private readonly feeds = new Map<string, CapsuleFeed>();
  /** Every open channel stream, for the drain (one signal listener, not one per stream). */
  private readonly listeners = new Set<ChannelListener>();
  private readonly observers: ((capsule: string, records: readonly LogRecord[], before: number) => void)[] =
    [];

  constructor(
    private readonly core: GatewayCore,
    private readonly logger: Logger,
  ) {
    const drain = (): void => {
      for (const l of [...this.listeners]) l.end('stream_closed', l.latest());
    };
    if (core.shutdownSignal.aborted) queueMicrotask(drain);
    else core.shutdownSignal.addEventListener('abort', drain, { once: true });
  }

  /** A stream opened: the drain ends it with `end stream_closed`. */
  track(listener: ChannelListener): void {
    if (this.core.shutdownSignal.aborted) {
      queueMicrotask(() => listener.end('stream_closed', listener.latest()));
      return;
    }
    this.listeners.add(listener);
    listener.onClose(() => this.listeners.delete(listener));
  }

  /** Also hand every record the feeds see to `fn` (the registry follows the log through it). */
  observe(fn: (capsule: string, records: readonly LogRecord[], before: number) => void): void {
    this.observers.push(fn);
  }

  /** The capsule's feed, started after `head` when none runs. */
  feed(capsule: string, head: number): CapsuleFeed {
    const running = this.feeds.get(capsule);
    if (running && !running.closed) return running;
    const feed: CapsuleFeed = new CapsuleFeed(
      this.core,
      capsule,
      head,
      this.logger,
      () => {
        if (this.feeds.get(capsule) === feed) this.feeds.delete(capsule);
      },
      this.observers.map((fn) => (records, before) => fn(capsule, records, before)),
    );
    this.feeds.set(capsule, feed);
    return feed;
  }

  get(capsule: string): CapsuleFeed | undefined {
    return this.feeds.get(capsule);
  }
}
