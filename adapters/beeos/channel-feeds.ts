/**
 * The BeeOS live feeds of this process (src/hub/live-feeds.ts, channel-feed.ts), one per capsule
 * with live channel streams, and every open channel stream, which the drain ends with `end
 * stream_closed`.
 */
import type { Logger } from 'pino';
import type { GatewayCore } from '../../src/core/types.js';
import { LiveFeeds } from '../../src/hub/live-feeds.js';
import { FEED_RING, type FeedPolicy } from '../../src/hub/live-feed.js';
import type { LogRecord } from '../../src/log/record.js';
import { ChannelFeed } from './channel-feed.js';
import type { ChannelListener } from './channel-listener.js';
import type { SharedProjection } from './shared-projection.js';
import { beeosMeta } from './records.js';

/** Process-wide counts of feed resumes and resets (beeosFeedStats). */
const feedCounters = { resumes: 0, resets: 0 };

const POLICY: FeedPolicy = {
  surface: 'beeos',
  // A store reset is shown to each stream in order (`backfill_truncated`); the feed goes on.
  storeReset: 'follow',
  // Recent records, so a listener reaches the feed's position without another read.
  ring: FEED_RING,
  // An accepted submission names the task it became: the task's frames belong to its context.
  link: (record) => {
    if (record.kind !== 'submission') return null;
    const meta = beeosMeta(record);
    return meta?.op === 'outcome' && meta.outcome === 'accepted' && meta.taskId
      ? { taskId: meta.taskId, contextId: record.contextId }
      : null;
  },
};

/** Every feed of the process that has not closed (beeosFeedStats). */
const liveFeeds = new Set<ChannelFeed>();
export interface BeeosFeedStats {
  /** Live feeds (of `capsule` when given). */
  feeds: number;
  /** Their hub subscriptions open now (at most one per feed; none while it retries). */
  subscriptions: number;
  projections: number;
  /** Streams joined to a shared projection. */
  listeners: number;
  /** Streams replaying on their own that keep a feed alive. */
  replaying: number;
  /** Process-wide: hub subscriptions followed again after they ended. */
  resumes: number;
  /** Process-wide: feeds that found their cursor invalid on resuming and dropped their streams. */
  resets: number;
}

/** The BeeOS feeds of this process, for tests and metrics. */
export const beeosFeedStats = (capsule?: string): BeeosFeedStats => {
  const out = { feeds: 0, subscriptions: 0, projections: 0, listeners: 0, replaying: 0, ...feedCounters };
  for (const feed of liveFeeds) {
    if (capsule !== undefined && feed.capsule !== capsule) continue;
    const s = feed.stats();
    out.feeds++;
    out.subscriptions += s.subscribed ? 1 : 0;
    out.projections += s.projections;
    out.listeners += s.listeners;
    out.replaying += s.replaying;
  }
  return out;
};

export class ChannelFeeds {
  private readonly feeds: LiveFeeds<SharedProjection, ChannelFeed>;
  /** Every open channel stream, for the drain (one signal listener, not one per stream). */
  private readonly listeners = new Set<ChannelListener>();
  private readonly observers: ((capsule: string, records: readonly LogRecord[], before: number) => void)[] =
    [];

  constructor(
    private readonly core: GatewayCore,
    logger: Logger,
  ) {
    const drain = (): void => {
      for (const l of [...this.listeners]) l.end('stream_closed', l.latest());
    };
    if (core.shutdownSignal.aborted) queueMicrotask(drain);
    else core.shutdownSignal.addEventListener('abort', drain, { once: true });
    this.feeds = new LiveFeeds<SharedProjection, ChannelFeed>(
      core,
      logger,
      POLICY,
      (feed) => {
        const sink: ChannelFeed = new ChannelFeed(
          feed,
          this.observers.map((fn) => (records, before) => fn(feed.capsule, records, before)),
          () => liveFeeds.delete(sink),
        );
        liveFeeds.add(sink);
        return sink;
      },
      feedCounters,
    );
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

  /** The capsule's feed, started after `head` (of log `epoch`) when none runs. */
  feed(capsule: string, head: number, epoch: number): ChannelFeed {
    return this.feeds.open(capsule, head, epoch).sink;
  }

  get(capsule: string): ChannelFeed | undefined {
    return this.feeds.running(capsule)?.sink;
  }
}
