/**
 * The hub: the read side of GatewayCore. One tail reader per capsule per process (`capsule-channel`),
 * fanned out to subscribers (`subscriber`) and long-poll waiters (`waiter`). Writing is the log's.
 */
import pino, { type Logger } from 'pino';
import type { LogRecord } from '../log/record.js';
import type { LogPosition, LogStore } from '../log/store.js';
import type {
  ContextPage,
  CursorStatus,
  GatewayCore,
  SubscribeOptions,
  Subscription,
  WaitResult,
} from '../core/types.js';
import { CapsuleChannel } from './capsule-channel.js';
import { ContextReads, type ContextReadsStats } from './context-reads.js';
import { Subscriber } from './subscriber.js';
import { waitOnChannel } from './waiter.js';

export interface HubOptions {
  /** Records per store read, for the tail loop and catch-up pages. */
  pageSize?: number;
  /** Default bound on a subscriber's queue (SubscribeOptions.maxQueuedRecords overrides it). */
  maxQueuedRecords?: number;
  /** How long one tail wait parks in the store before it is renewed. */
  tailWaitMs?: number;
  /** How long a capsule's tail loop outlives its last listener. */
  dissolveMs?: number;
  /** Pause before the tail loop retries after a store error. */
  retryMs?: number;
  /** Recent records per capsule kept in memory for readers near the head. */
  recentRecords?: number;
  /** How long a capsule's per-context index outlives its last readContext (then rebuilt on demand). */
  contextIdleMs?: number;
  logger?: Logger;
  /** After each live batch's fan-out, with the surfaces served (capsule-channel.ts). */
  onDelivered?: (records: readonly LogRecord[], surfaces: readonly string[]) => void;
}

/** The part of GatewayCore the hub implements. */
export type HubReadSide = Pick<
  GatewayCore,
  'position' | 'cursorStatus' | 'read' | 'readContext' | 'contextFirst' | 'waitAfter' | 'subscribe'
>;

export interface CapsuleHubStats {
  subscribers: number;
  waiters: number;
  /** Whether this capsule's tail loop is running (at most one per capsule). */
  tailLoop: boolean;
}

export interface HubStats {
  tailLoops: number;
  subscribers: number;
  waiters: number;
  /** Per-context indexes in memory: capsules indexed, contexts and record offsets they hold. */
  contextIndex: ContextReadsStats;
  capsules: Record<string, CapsuleHubStats>;
}

const DEFAULTS = {
  pageSize: 500,
  maxQueuedRecords: 10_000,
  tailWaitMs: 15_000,
  dissolveMs: 5_000,
  retryMs: 1_000,
  recentRecords: 10_000,
  contextIdleMs: 600_000,
};

export class Hub implements HubReadSide {
  private readonly channels = new Map<string, CapsuleChannel>();
  private readonly settings: Required<Omit<HubOptions, 'logger' | 'onDelivered'>> & {
    logger: Logger;
    onDelivered: HubOptions['onDelivered'];
  };
  private readonly contexts: ContextReads;
  private closed = false;

  constructor(
    private readonly store: LogStore,
    options: HubOptions = {},
  ) {
    this.settings = {
      pageSize: options.pageSize ?? DEFAULTS.pageSize,
      maxQueuedRecords: options.maxQueuedRecords ?? DEFAULTS.maxQueuedRecords,
      tailWaitMs: options.tailWaitMs ?? DEFAULTS.tailWaitMs,
      dissolveMs: options.dissolveMs ?? DEFAULTS.dissolveMs,
      retryMs: options.retryMs ?? DEFAULTS.retryMs,
      recentRecords: options.recentRecords ?? DEFAULTS.recentRecords,
      contextIdleMs: options.contextIdleMs ?? DEFAULTS.contextIdleMs,
      logger: options.logger ?? pino({ level: 'silent' }),
      onDelivered: options.onDelivered,
    };
    this.contexts = new ContextReads(store, (capsule) => this.channels.get(capsule), {
      pageSize: this.settings.pageSize,
      idleMs: this.settings.contextIdleMs,
      logger: this.settings.logger,
    });
  }

  position(capsule: string): Promise<LogPosition> {
    return this.store.position(capsule);
  }

  /** The log's count of frames-possibly-missing facts (operators' view; a store read). */
  possiblyMissing(capsule: string): Promise<number> {
    return this.store.possiblyMissing(capsule);
  }

  async cursorStatus(
    capsule: string,
    after: number,
  ): Promise<{ status: CursorStatus; position: LogPosition }> {
    if (this.closed) {
      const position = await this.store.position(capsule);
      return { status: cursorStatusAt(position, after), position };
    }
    // The channel is started here: the caller reads or subscribes next, through it.
    const channel = this.channel(capsule);
    channel.linger();
    const known = channel.knownPosition(after);
    if (known) return { status: 'ok', position: known };
    const shared = channel.sharedPosition();
    let position = await shared.position;
    let status = cursorStatusAt(position, after);
    // 'ahead' from a position asked before this call may only mean the head moved since: ask anew.
    // ('gone' stands: retention only trims further; 'ok' is as good as a position read just before.)
    if (status === 'ahead' && shared.joined) {
      position = await this.store.position(capsule);
      status = cursorStatusAt(position, after);
    }
    return { status, position };
  }

  read(
    capsule: string,
    after: number,
    limit: number,
  ): Promise<{ records: LogRecord[]; position: LogPosition }> {
    if (this.closed) return this.store.read(capsule, after, limit);
    // Through the capsule's channel (started if need be): readers of the same records share one store
    // read and its record objects, and what they read stays in memory for the next (a poll storm).
    const channel = this.channel(capsule);
    channel.linger();
    return channel.read(after, limit, false);
  }

  readContext(
    capsule: string,
    contextId: string,
    after: number,
    limit: number,
    tasks?: readonly string[],
  ): Promise<ContextPage> {
    return this.contexts.read(capsule, contextId, after, limit, tasks);
  }

  contextFirst(capsule: string, contextId: string): Promise<number | null> {
    return this.contexts.first(capsule, contextId);
  }

  async waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<WaitResult> {
    if (this.closed) {
      return { records: [], timedOut: false, position: await this.store.position(capsule) };
    }
    return waitOnChannel(this.channel(capsule), this.store, { after, limit, timeoutMs, signal });
  }

  subscribe(capsule: string, options: SubscribeOptions): Subscription {
    if (this.closed) {
      queueMicrotask(() => options.onEnd('shutdown'));
      return { close: () => undefined };
    }
    const subscriber = new Subscriber(this.channel(capsule), options, {
      pageSize: this.settings.pageSize,
      maxQueuedRecords: this.settings.maxQueuedRecords,
      logger: this.settings.logger,
    });
    subscriber.start();
    return subscriber;
  }

  /** Counts for /capsules and /metrics. */
  stats(): HubStats {
    const stats: HubStats = {
      tailLoops: 0,
      subscribers: 0,
      waiters: 0,
      contextIndex: this.contexts.stats(),
      capsules: {},
    };
    for (const [capsule, channel] of this.channels) {
      const entry = this.capsuleStats(capsule);
      stats.capsules[capsule] = entry;
      stats.subscribers += entry.subscribers;
      stats.waiters += entry.waiters;
      if (channel.running) stats.tailLoops++;
    }
    return stats;
  }

  capsuleStats(capsule: string): CapsuleHubStats {
    const channel = this.channels.get(capsule);
    if (!channel) return { subscribers: 0, waiters: 0, tailLoop: false };
    return {
      subscribers: channel.count('subscriber'),
      waiters: channel.count('waiter'),
      tailLoop: channel.running,
    };
  }

  /** End every subscription with 'shutdown', answer every waiter, stop every tail loop. */
  async close(): Promise<void> {
    this.closed = true;
    this.contexts.close();
    const channels = [...this.channels.values()];
    for (const channel of channels) channel.shutdown();
    await Promise.all(channels.map((channel) => channel.done));
  }

  /** The capsule's channel, started on first use; a stopped one has already left the map. */
  private channel(capsule: string): CapsuleChannel {
    let channel = this.channels.get(capsule);
    if (!channel) {
      channel = new CapsuleChannel(capsule, this.store, this.settings, (stopped) => {
        if (this.channels.get(capsule) === stopped) this.channels.delete(capsule);
      });
      channel.tap = {
        batch: (after, records, position) => this.contexts.fed(capsule, after, records, position),
        reset: () => this.contexts.lost(capsule),
      };
      this.channels.set(capsule, channel);
    }
    return channel;
  }
}

/**
 * 'gone' when records after `after` were trimmed, 'ahead' when `after` is beyond the head. Cursor 0
 * is "no cursor": a client that holds nothing lost nothing, and a log's first offset is far above 1
 * (epochs start at a time floor), so 0 reads whatever is retained, from the start, with no gap.
 */
export const cursorStatusAt = (position: LogPosition, after: number): CursorStatus => {
  if (after > 0 && after < position.first - 1) return 'gone';
  if (after > position.head) return 'ahead';
  return 'ok';
};
