/**
 * The BeeOS live feeds of this process (channel-feed.ts), one per capsule with live channel streams,
 * and every open channel stream, which the drain ends with `end stream_closed`.
 */
import type { Logger } from 'pino';
import type { GatewayCore } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import { CapsuleFeed, feedCounters } from './channel-feed.js';
import type { ChannelListener } from './channel-listener.js';

/** The feeds of this process's BeeOS surface, one per capsule with live channel streams. */
/** Every feed of the process that has not closed (beeosFeedStats). */
const liveFeeds = new Set<CapsuleFeed>();

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

  /** The capsule's feed, started after `head` (of log `epoch`) when none runs. */
  feed(capsule: string, head: number, epoch: number): CapsuleFeed {
    const running = this.feeds.get(capsule);
    if (running && !running.closed) return running;
    const feed: CapsuleFeed = new CapsuleFeed(
      this.core,
      capsule,
      head,
      epoch,
      this.logger,
      () => {
        liveFeeds.delete(feed);
        if (this.feeds.get(capsule) === feed) this.feeds.delete(capsule);
      },
      this.observers.map((fn) => (records, before) => fn(capsule, records, before)),
    );
    this.feeds.set(capsule, feed);
    if (!feed.closed) liveFeeds.add(feed);
    return feed;
  }

  get(capsule: string): CapsuleFeed | undefined {
    return this.feeds.get(capsule);
  }
}
