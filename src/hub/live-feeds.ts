/**
 * A surface's live feeds in this process (live-feed.ts): at most one per capsule, made on first use
 * and forgotten when it closes (its last projector left and nobody holds it) or ends. On drain every
 * feed ends `shutdown`. Each surface has its own registry: what a feed carries is the surface's.
 */
import type { Logger } from 'pino';
import { LiveFeed, type FeedCore, type FeedCounters, type FeedPolicy, type FeedSink } from './live-feed.js';

export class LiveFeeds<T, S extends FeedSink = FeedSink> {
  private readonly feeds = new Map<string, LiveFeed<T, S>>();
  private readonly starting = new Map<string, Promise<LiveFeed<T, S>>>();
  /** Process-wide for the surface: resumes and resets of every feed it ever ran. */
  readonly counters: FeedCounters;

  constructor(
    private readonly core: FeedCore,
    private readonly logger: Logger,
    private readonly policy: FeedPolicy,
    /** The surface's side of a new feed. */
    private readonly sink: (feed: LiveFeed<T, S>) => S,
    counters: FeedCounters = { resumes: 0, resets: 0 },
  ) {
    this.counters = counters;
    const endAll = (): void => {
      for (const feed of [...this.feeds.values()]) feed.end('shutdown');
    };
    if (core.shutdownSignal.aborted) queueMicrotask(endAll);
    else core.shutdownSignal.addEventListener('abort', endAll, { once: true });
  }

  /** The capsule's running feed, or a new one that follows the log after `after` (of log `epoch`). */
  open(capsule: string, after: number, epoch: number): LiveFeed<T, S> {
    const running = this.feeds.get(capsule);
    if (running && !running.closed) return running;
    const deps = { core: this.core, logger: this.logger, policy: this.policy, counters: this.counters };
    const feed = new LiveFeed<T, S>(deps, capsule, after, epoch, this.sink, (closed) => {
      if (this.feeds.get(capsule) === closed) this.feeds.delete(capsule);
    });
    if (!feed.closed) this.feeds.set(capsule, feed);
    return feed;
  }

  /** The capsule's running feed, or one started at the log's head now (one start at a time). */
  start(capsule: string): Promise<LiveFeed<T, S>> {
    const running = this.feeds.get(capsule);
    if (running && !running.closed) return Promise.resolve(running);
    let starting = this.starting.get(capsule);
    if (!starting) {
      starting = this.core.position(capsule).then((position) => {
        const feed = this.open(capsule, position.head, position.epoch);
        if (this.core.shutdownSignal.aborted) feed.end('shutdown');
        return feed;
      });
      const started = starting;
      const forget = (): void => {
        if (this.starting.get(capsule) === started) this.starting.delete(capsule);
      };
      started.then(forget, forget);
      this.starting.set(capsule, started);
    }
    return starting;
  }

  /** The running feed of a capsule, without starting one. */
  running(capsule: string): LiveFeed<T, S> | undefined {
    const feed = this.feeds.get(capsule);
    return feed && !feed.closed ? feed : undefined;
  }

  /** Every running feed (stats, sweeps). */
  all(): LiveFeed<T, S>[] {
    return [...this.feeds.values()];
  }
}
