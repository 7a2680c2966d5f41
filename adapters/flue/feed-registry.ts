/**
 * The Flue live feeds of this process (src/hub/live-feeds.ts), one per capsule, made on first use.
 * A conversation's projection nobody follows lingers a while (a long-poll loop comes back within
 * it), then is swept; the feed closes with its last projection, so an idle capsule's hub channel can
 * dissolve too. On drain every feed ends its followers ('shutdown').
 */
import type { FeedPolicy } from '../../src/hub/live-feed.js';
import { LiveFeeds } from '../../src/hub/live-feeds.js';
import { CapsuleFeed, type FeedDeps } from './live-feed.js';
import type { SharedProjection } from './shared-projection.js';

const POLICY: FeedPolicy = {
  surface: 'flue',
  // Flue offsets name the store generation: a new one makes every state and offset of the feed stale.
  storeReset: 'end',
};

export class FeedRegistry {
  private readonly feeds: LiveFeeds<SharedProjection, CapsuleFeed>;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(private readonly deps: FeedDeps) {
    this.feeds = new LiveFeeds(deps.core, deps.logger, POLICY, (feed) => {
      // Feeds start at a position read from the log: their epoch is known and never followed past.
      return new CapsuleFeed(deps, feed, feed.epoch ?? 0);
    });
  }

  /** The capsule's feed, started at the current head when there is none. */
  async feed(capsule: string): Promise<CapsuleFeed> {
    const feed = (await this.feeds.start(capsule)).sink;
    this.arm();
    return feed;
  }

  /** A feed started after `head` of log `epoch` (or the running one). */
  openAt(capsule: string, epoch: number, head: number): CapsuleFeed {
    const feed = this.feeds.open(capsule, head, epoch).sink;
    this.arm();
    return feed;
  }

  /** The running feed of a capsule, without starting one. */
  running(capsule: string): CapsuleFeed | undefined {
    return this.feeds.running(capsule)?.sink;
  }

  private arm(): void {
    if (this.sweeper || this.feeds.all().length === 0) return;
    this.sweeper = setInterval(() => this.sweep(), Math.max(50, this.deps.lingerMs / 4));
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = Date.now();
    for (const feed of this.feeds.all()) {
      feed.sink.sweep(now);
      // A feed none of whose conversations got a projection (a failed rebuild) closes too.
      feed.closeIfUnused();
    }
    if (this.feeds.all().length === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }
}
