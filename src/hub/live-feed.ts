/**
 * The live feed of one capsule for one surface in this process: ONE hub subscription, however many
 * clients of the surface follow the capsule, whose records a surface dispatches by context to its
 * projectors (one per context, or one per group of readers in the same state). The hub already
 * reads each capsule's tail once per process; the feed makes the surface's projection once per
 * process too, instead of once per connection.
 *
 * What every surface's feed must do alike lives here, so it cannot drift between surfaces:
 * - resume on `slow` or `store_error`, after a backoff, from the feed's cursor, once the log is known
 *   to continue it (`cursorStatus`): a cursor trimmed, beyond the head (the log went backwards: a new
 *   subscription would wait for offsets that come back with other content) or of another epoch than
 *   the one the feed follows means the surface's states describe records the log no longer has: the
 *   feed ends `gone` and the surface's clients start over from their own offsets;
 * - end `shutdown` on drain or when this replica is cut from its store (clients resume elsewhere);
 * - a store reset met live: the surface says whether its states survive it (`follow`: the epoch is
 *   learnt on the next resume) or not (`end`: the feed ends `gone`);
 * - attribute records to contexts in order (one tracker per feed), and index the surface's
 *   projectors by context;
 * - keep the subscription only while someone uses it: when the last projector leaves and no reader
 *   holds the feed (one catching up on its own to join it), the feed closes and its registry
 *   (live-feeds.ts) forgets it.
 *
 * What a record means, what is written and to whom stays with the surface (`FeedSink`).
 */
import type { Logger } from 'pino';
import type { GatewayCore, Subscription, SubscriptionEnd } from '../core/types.js';
import { isStoreReset } from '../core/store-reset.js';
import { storeUnreachable } from '../errors.js';
import { ContextTracker } from '../log/frame-view.js';
import type { LogRecord } from '../log/record.js';

/**
 * Why a feed ended. `shutdown`: the gateway drains or lost its store (clients resume from their
 * offsets, on another replica if need be). `gone`: the log no longer continues the feed's cursor.
 */
export type FeedEnd = 'shutdown' | 'gone';

/** Recent records a feed keeps when a surface asks for a ring (a reader joins from it). */
export const FEED_RING = 4096;

/** Pauses before each resume of a feed whose subscription ended, reset once records flow again. */
export const FEED_RETRY_MS: readonly number[] = [100, 500, 1_000, 2_000, 5_000];

/** What a feed asks of the core. */
export type FeedCore = Pick<GatewayCore, 'subscribe' | 'cursorStatus' | 'position' | 'shutdownSignal'>;

/** How a surface's feeds behave where surfaces differ by design. */
export interface FeedPolicy {
  /** The surface serving the subscription (the delivery-lag metric's label, logs). */
  surface: string;
  /** A store reset met live: `follow` it (the surface shows it), or `end` the feed `gone`. */
  storeReset: 'follow' | 'end';
  /** Recent records kept so a reader can reach the feed's position without another read (0: none). */
  ring?: number;
  /** A task → context link a record makes beyond those its frames carry (e.g. an accepted submit). */
  link?: (record: LogRecord) => { taskId: string; contextId: string } | null;
  /** Pauses before resuming (default FEED_RETRY_MS). */
  retryMs?: readonly number[];
}

/** The surface's side of one feed. Both calls are synchronous. */
export interface FeedSink {
  /**
   * Records past the cursor, in order; `before` is the cursor before them. Every record up to the
   * last one counts as dispatched once this returns (`feed.cursor`); a sink may move the cursor on
   * earlier, part by part (`feed.passed`).
   */
  onRecords(records: readonly LogRecord[], before: number): void;
  /** The feed ended (not called when it closes because nobody uses it any more). */
  onEnd(reason: FeedEnd): void;
  /** The feed is over, ended or closed: its subscription is gone. */
  onClose?(): void;
}

export interface FeedCounters {
  /** Hub subscriptions followed again after they ended. */
  resumes: number;
  /** Feeds that found their cursor no longer continued by the log and ended `gone`. */
  resets: number;
}

export interface FeedDeps {
  core: FeedCore;
  logger: Logger;
  policy: FeedPolicy;
  counters: FeedCounters;
}

export class LiveFeed<T, S extends FeedSink = FeedSink> {
  /** Every record up to here has been dispatched. */
  cursor: number;
  /** The log epoch the cursor belongs to; null after following a store reset live (learnt on resume). */
  epoch: number | null;
  readonly sink: S;
  ended: FeedEnd | null = null;
  closed = false;
  private readonly ring: LogRecord[] = [];
  /** The ring holds every record after this offset (up to `cursor`). */
  private ringFrom: number;
  private readonly tracker = new ContextTracker();
  private readonly byContext = new Map<string, Set<T>>();
  private readonly contexts = new Map<T, string>();
  /** Readers that keep the feed alive without a projector of their own (yet). */
  private holds = 0;
  private subscription: Subscription | null = null;
  private retry: NodeJS.Timeout | null = null;
  private failures = 0;

  constructor(
    private readonly deps: FeedDeps,
    readonly capsule: string,
    after: number,
    epoch: number,
    sink: (feed: LiveFeed<T, S>) => S,
    private readonly onClosed: (feed: LiveFeed<T, S>) => void,
  ) {
    this.cursor = after;
    this.ringFrom = after;
    this.epoch = epoch;
    this.sink = sink(this);
    this.subscribe();
  }

  /** Whether a hub subscription is open now (none while the feed waits to resume). */
  get subscribed(): boolean {
    return this.subscription !== null;
  }

  // ---- projectors, by context ----

  /** Index a projector under its context: records of that context go to it (`dispatch`). */
  add(target: T, context: string): void {
    this.contexts.set(target, context);
    let set = this.byContext.get(context);
    if (!set) this.byContext.set(context, (set = new Set()));
    set.add(target);
  }

  /** A projector leaves; the feed closes when it was the last one and nobody holds the feed. */
  remove(target: T): void {
    const context = this.contexts.get(target);
    if (context === undefined) return;
    this.contexts.delete(target);
    const set = this.byContext.get(context);
    set?.delete(target);
    if (set?.size === 0) this.byContext.delete(context);
    this.maybeIdle();
  }

  /** Every projector of the feed. */
  get targets(): IterableIterator<T> {
    return this.contexts.keys();
  }

  get size(): number {
    return this.contexts.size;
  }

  /**
   * The context a record belongs to, or null when it cannot be attributed (facts, tasks whose
   * attributing frame came before the feed). Once per record, in order: it learns as it goes.
   */
  private contextOf(record: LogRecord): string | null {
    const link = this.deps.policy.link?.(record);
    if (link) this.tracker.link(link.taskId, link.contextId);
    return this.tracker.contextOf(record);
  }

  /** Learn that a task belongs to a context (a projector recognised it as its own). */
  link(taskId: string, contextId: string): void {
    this.tracker.link(taskId, contextId);
  }

  /**
   * Dispatch by context: each record to the projectors of its context, and one that cannot be
   * attributed to every projector (they judge it with their own attribution), or to
   * `unattributed` when the surface decides.
   */
  dispatch(
    records: readonly LogRecord[],
    deliver: (target: T, record: LogRecord) => void,
    unattributed?: (record: LogRecord) => void,
  ): void {
    for (const record of records) {
      const context = this.contextOf(record);
      if (context === null) {
        if (unattributed) unattributed(record);
        else for (const target of [...this.contexts.keys()]) deliver(target, record);
        continue;
      }
      const targets = this.byContext.get(context);
      // A copy, as a projector may leave while it is handed the record (one alone needs none).
      if (targets) for (const target of targets.size === 1 ? targets : [...targets]) deliver(target, record);
    }
  }

  // ---- readers that keep the feed ----

  /** A reader catches up on its own to join the feed: keep it (and its ring) running meanwhile. */
  hold(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
      this.maybeIdle();
    };
  }

  /** Records after `after` up to the cursor from the ring, or null when the ring no longer has them. */
  recent(after: number): readonly LogRecord[] | null {
    if (after >= this.cursor) return [];
    if (!this.deps.policy.ring || after < this.ringFrom) return null;
    let lo = 0;
    let hi = this.ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.ring[mid]?.offset ?? 0) <= after) lo = mid + 1;
      else hi = mid;
    }
    return this.ring.slice(lo);
  }

  /** The sink has dispatched every record up to `offset` (part of a delivery). */
  passed(offset: number): void {
    if (offset > this.cursor) this.cursor = offset;
  }

  // ---- the subscription ----

  /** End the feed for every reader of it (`sink.onEnd`), and close it. */
  end(reason: FeedEnd): void {
    if (this.ended || this.closed) return;
    this.ended = reason;
    if (reason === 'gone') this.deps.counters.resets++;
    this.stop();
    this.sink.onEnd(reason);
    this.forget();
  }

  /** Close without ending anyone: nobody uses the feed any more. */
  close(): void {
    if (this.closed) return;
    this.stop();
    this.forget();
  }

  private stop(): void {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    // Closed first: the subscription's own end ('closed') finds the feed closed and is ignored.
    this.subscription?.close();
    this.subscription = null;
  }

  private forget(): void {
    this.byContext.clear();
    this.contexts.clear();
    this.sink.onClose?.();
    this.onClosed(this);
  }

  /** Close when no projector is left and nobody holds the feed (true when it is closed). */
  closeIfUnused(): boolean {
    this.maybeIdle();
    return this.closed;
  }

  private maybeIdle(): void {
    if (this.contexts.size === 0 && this.holds === 0) this.close();
  }

  private subscribe(): void {
    const sub: Subscription = this.deps.core.subscribe(this.capsule, {
      after: this.cursor,
      surface: this.deps.policy.surface,
      onRecords: (records) => this.deliver(records),
      onEnd: (reason) => this.onEnd(reason, sub),
    });
    if (!this.closed) this.subscription = sub;
  }

  private onEnd(reason: SubscriptionEnd, sub: Subscription): void {
    if (this.subscription !== sub || this.closed) return;
    this.subscription = null;
    if (reason === 'closed') return;
    // Draining, or cut from the store: clients resume elsewhere from their offsets.
    if (reason === 'shutdown' || reason === 'store_unreachable') return this.end('shutdown');
    // Slow or a store error: resume from the cursor, once the log is known to continue it.
    this.deps.logger.info(
      { capsule: this.capsule, surface: this.deps.policy.surface, reason, cursor: this.cursor },
      'live feed resumes',
    );
    this.scheduleResume();
  }

  private scheduleResume(): void {
    const ladder = this.deps.policy.retryMs ?? FEED_RETRY_MS;
    const delay = ladder[Math.min(this.failures++, ladder.length - 1)] ?? 0;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.resume();
    }, delay);
  }

  private async resume(): Promise<void> {
    if (this.closed) return;
    let checked;
    try {
      checked = await this.deps.core.cursorStatus(this.capsule, this.cursor);
    } catch (err) {
      // Cut from the store: readers end now (and resume elsewhere), not held in silence.
      if (storeUnreachable(err)) return this.end('shutdown');
      this.deps.logger.warn(
        { err, capsule: this.capsule, surface: this.deps.policy.surface },
        'live feed cannot check its cursor; retrying',
      );
      if (!this.closed) this.scheduleResume();
      return;
    }
    if (this.closed) return;
    const { status, position } = checked;
    if (status !== 'ok' || (this.epoch !== null && position.epoch !== this.epoch)) {
      this.deps.logger.warn(
        { capsule: this.capsule, surface: this.deps.policy.surface, cursor: this.cursor, status, position },
        'the log no longer continues the live feed; its readers start over',
      );
      return this.end('gone');
    }
    this.epoch = position.epoch;
    this.deps.counters.resumes++;
    this.subscribe();
  }

  /** Synchronous by design: every projector moves in one step per batch. */
  private deliver(all: readonly LogRecord[]): void {
    if (this.closed) return;
    this.failures = 0;
    let from = 0;
    while (from < all.length && all[from]!.offset <= this.cursor) from++;
    if (from === all.length) return;
    const records = from === 0 ? all : all.slice(from);
    const reset = records.some(isStoreReset);
    // Every state and offset of the feed belongs to the old epoch.
    if (reset && this.deps.policy.storeReset === 'end') return this.end('gone');
    const before = this.cursor;
    this.sink.onRecords(records, before);
    // A new epoch followed in order: its number is learnt when the feed next checks the log.
    if (reset) this.epoch = null;
    this.passed(records[records.length - 1]!.offset);
    this.remember(records);
  }

  private remember(records: readonly LogRecord[]): void {
    const size = this.deps.policy.ring ?? 0;
    if (size === 0) return;
    for (const record of records) this.ring.push(record);
    if (this.ring.length > size * 2) {
      const drop = this.ring.length - size;
      this.ringFrom = this.ring[drop - 1]?.offset ?? this.ringFrom;
      this.ring.splice(0, drop);
    }
  }
}
