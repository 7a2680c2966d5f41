/**
 * The BeeOS side of a capsule's live feed (src/hub/live-feed.ts: one hub subscription per capsule in
 * this process, its resumes and cursor checks): each record goes by its context to the shared
 * projections of that context's channels (records it cannot attribute go to every projection,
 * which decide). A shared projection projects a record once, encodes each envelope once, and hands
 * the same Buffers to every listener, which filters only by what differs (`since`, `include_deltas`).
 *
 * A listener replays on its own up to the feed's position (channel-stream.ts), closing the last
 * stretch synchronously from the feed's ring of recent records, then joins the projection whose
 * state equals its own (`shareKey`), or makes its projector a new shared one.
 *
 * When the feed ends `shutdown` (drain, or cut from the store) every stream ends with `end
 * stream_closed` at its offset; when it ends `gone` (the log no longer continues it: its
 * projections describe records the log no longer has) streams are dropped without `end` (not
 * terminal: each client reconnects with since and replays the log as it is now).
 */
import type { FeedEnd, FeedSink, LiveFeed } from '../../src/hub/live-feed.js';
import type { LogRecord } from '../../src/log/record.js';
import type { ChannelListener } from './channel-listener.js';
import type { ChannelProjector } from './projection.js';
import { SharedProjection } from './shared-projection.js';

export type BeeosLiveFeed = LiveFeed<SharedProjection, ChannelFeed>;

export class ChannelFeed implements FeedSink {
  private readonly byChannel = new Map<string, SharedProjection[]>();
  /** Listeners still waiting for their replay_complete. */
  private readonly pendingReplay = new Map<ChannelListener, SharedProjection>();
  /** Listeners replaying on their own (they keep the feed alive). */
  private readonly replaying = new Set<ChannelListener>();

  constructor(
    private readonly feed: BeeosLiveFeed,
    private readonly observers: readonly ((records: readonly LogRecord[], before: number) => void)[],
    private readonly onOver: () => void,
  ) {}

  get capsule(): string {
    return this.feed.capsule;
  }

  /** Every record up to here has been dispatched. */
  get cursor(): number {
    return this.feed.cursor;
  }

  get closed(): boolean {
    return this.feed.closed;
  }

  /** Records after `after` up to the cursor from the feed's ring, or null when it no longer has them. */
  recent(after: number): readonly LogRecord[] | null {
    return this.feed.recent(after);
  }

  /** Synchronous by design: every projection and listener moves in one step per batch. */
  onRecords(records: readonly LogRecord[], before: number): void {
    this.feed.dispatch(records, (p, record) => {
      if (p.ended) return;
      p.onRecord(record);
      if (p.ended || p.listeners.size === 0) this.remove(p);
    });
    this.feed.passed(records[records.length - 1]!.offset);
    for (const [l, p] of this.pendingReplay) {
      l.passed(this.feed.cursor, p.projector.latestOffset);
      if (l.replayDone || l.ended) this.pendingReplay.delete(l);
    }
    for (const observe of this.observers) observe(records, before);
  }

  onEnd(reason: FeedEnd): void {
    const projections = [...this.feed.targets];
    if (reason === 'shutdown') {
      // Every stream ends with `stream_closed` at its offset (clients resume with since).
      for (const p of projections)
        for (const l of p.listeners) l.end('stream_closed', p.projector.latestOffset);
      return;
    }
    // Drop every stream of the feed (they reconnect with since) and its projections with it.
    const listeners = [...this.replaying, ...this.pendingReplay.keys()];
    for (const p of projections) listeners.push(...p.listeners);
    this.byChannel.clear();
    this.pendingReplay.clear();
    for (const l of listeners) l.drop();
  }

  onClose(): void {
    this.onOver();
  }

  /** A listener starts replaying on its own: keep the feed (and its ring) running meanwhile. */
  hold(listener: ChannelListener): () => void {
    this.replaying.add(listener);
    const release = this.feed.hold();
    return () => {
      if (this.replaying.delete(listener)) release();
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
      this.feed.add(shared, contextId);
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
    for (const l of p.listeners) this.pendingReplay.delete(l);
    const list = this.byChannel.get(p.channelId)?.filter((q) => q !== p) ?? [];
    if (list.length > 0) this.byChannel.set(p.channelId, list);
    else this.byChannel.delete(p.channelId);
    // Last: the feed closes when this was its last projection and nobody replays.
    this.feed.remove(p);
  }

  /** Shared projections and listeners (tests, metrics). */
  stats(): { projections: number; listeners: number; replaying: number; subscribed: boolean } {
    let listeners = 0;
    for (const p of this.feed.targets) listeners += p.listeners.size;
    return {
      projections: this.feed.size,
      listeners,
      replaying: this.replaying.size,
      subscribed: this.feed.subscribed,
    };
  }
}
