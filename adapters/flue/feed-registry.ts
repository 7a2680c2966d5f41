/**
 * The live feeds of this process, one per capsule, made on first use and dissolved when none of
 * their conversations has been followed for a while (so an idle capsule's hub channel can dissolve
 * too). On drain every feed ends its followers ('shutdown').
 */
import { CapsuleFeed, type FeedDeps } from './live-feed.js';

export class FeedRegistry {
  private readonly feeds = new Map<string, CapsuleFeed>();
  private readonly starting = new Map<string, Promise<CapsuleFeed>>();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(private readonly deps: FeedDeps) {
    deps.core.shutdownSignal.addEventListener('abort', () => this.endAll(), { once: true });
  }

  /** The capsule's feed, started at the current head when there is none. */
  feed(capsule: string): Promise<CapsuleFeed> {
    const existing = this.feeds.get(capsule);
    if (existing) return Promise.resolve(existing);
    let starting = this.starting.get(capsule);
    if (!starting) {
      starting = this.deps.core.position(capsule).then((position) => {
        const feed = new CapsuleFeed(this.deps, capsule, position.epoch, position.head, (ended) => {
          if (this.feeds.get(capsule) === ended) this.feeds.delete(capsule);
        });
        if (this.deps.core.shutdownSignal.aborted) feed.end('shutdown');
        else this.feeds.set(capsule, feed);
        this.arm();
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
  running(capsule: string): CapsuleFeed | undefined {
    return this.feeds.get(capsule);
  }

  private arm(): void {
    if (this.sweeper || this.feeds.size === 0) return;
    this.sweeper = setInterval(() => this.sweep(), Math.max(50, this.deps.lingerMs / 4));
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = Date.now();
    for (const feed of [...this.feeds.values()]) if (feed.sweep(now)) feed.end('shutdown');
    if (this.feeds.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  private endAll(): void {
    for (const feed of [...this.feeds.values()]) feed.end('shutdown');
  }
}
