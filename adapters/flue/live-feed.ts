/**
 * One live feed per capsule for the Flue surface in this process: a single hub subscription whose
 * records are dispatched to the shared projection of the conversation they belong to (an index
 * from context → projection; frames of tasks not yet attributed and facts go to every
 * projection). Each hub batch is cut into read cycles of at most one updates page, and each
 * cycle's `event: control` is encoded once for all conversations. A subscription that ends as
 * slow or on a store error resumes from the feed's cursor; a lost or trimmed cursor, or a new
 * store generation, ends every follower as 'gone'.
 */
import type { Logger } from 'pino';
import { isStoreReset } from '../../src/core/store-reset.js';
import type { GatewayCore, Subscription, SubscriptionEnd } from '../../src/core/types.js';
import { ContextTracker, viewFrame } from '../../src/log/frame-view.js';
import type { LogRecord } from '../../src/log/record.js';
import type { FlueChunk } from './chunks.js';
import { encodeControlEvent, formatOffset } from './codec.js';
import { UPDATES_PAGE } from './constants.js';
import type { ConversationProjector } from './projection.js';
import { SharedProjection, Slice, type FollowEnd } from './shared-projection.js';

/** Bound on the tasks remembered as owned by no followed conversation (then forgotten at once). */
const MAX_UNOWNED = 10_000;

export interface FeedDeps {
  core: GatewayCore;
  logger: Logger;
  /** The state of a conversation through an offset (a read, or a cached state). */
  seed: (
    capsule: string,
    conversationId: string,
    epoch: number,
    through: number,
  ) => Promise<ConversationProjector>;
  /** Every record the feed sees, in order, contiguous from `after` (the conversation index follows it). */
  observe?: (capsule: string, epoch: number, after: number, records: readonly LogRecord[]) => void;
  /** A projection nobody follows is kept this long (a long-poll loop comes back within it). */
  lingerMs: number;
  retryMs: number;
}

export class CapsuleFeed {
  /** Offset of the last record dispatched. */
  cursor: number;
  private readonly projections = new Map<string, SharedProjection>();
  private readonly tracker = new ContextTracker();
  /**
   * Tasks whose frames every current projection judged not its own (tasks of conversations nobody
   * follows that began before this feed): their frames skip the broadcast. Forgotten whenever a
   * projection is added, since it may own them.
   */
  private readonly unowned = new Set<string>();
  /**
   * Projections whose followers were last told "not up to date" (and those still seeding): an
   * up-to-date cycle with nothing of theirs must still visit them. Every other projection a cycle
   * brings nothing is left alone (see SharedProjection.advance), so a cycle costs its own
   * conversations, not every conversation followed.
   */
  private readonly behind = new Set<SharedProjection>();
  private subscription: Subscription | null = null;
  private retry: NodeJS.Timeout | null = null;
  ended: FollowEnd | null = null;

  constructor(
    private readonly deps: FeedDeps,
    readonly capsule: string,
    readonly epoch: number,
    head: number,
    private readonly onEnded: (feed: CapsuleFeed) => void,
  ) {
    this.cursor = head;
    this.subscribe();
  }

  /** The conversation's shared projection, created (and rebuilt from the log) on first use. */
  projection(conversationId: string): SharedProjection {
    let projection = this.projections.get(conversationId);
    if (!projection) {
      const through = this.cursor;
      const seed = this.deps
        .seed(this.capsule, conversationId, this.epoch, through)
        .then((projector) => ({ projector, through }));
      projection = new SharedProjection(conversationId, seed, () => this.cursor);
      this.projections.set(conversationId, projection);
      this.behind.add(projection);
      this.unowned.clear();
      const created = projection;
      // A failed rebuild (store down) is its waiters' error; the next reader tries afresh.
      created.ready.catch(() => {
        if (this.projections.get(conversationId) !== created) return;
        this.projections.delete(conversationId);
        this.behind.delete(created);
      });
    }
    projection.lastUsed = Date.now();
    return projection;
  }

  /** The shared state of a conversation if it is exactly at `offset` (a free starting point). */
  stateAt(conversationId: string, offset: number): ConversationProjector | null {
    const projection = this.projections.get(conversationId);
    return projection?.projector && projection.through === offset ? projection.projector : null;
  }

  /** Drop projections nobody followed for `lingerMs`; true when none is left. */
  sweep(now: number): boolean {
    for (const [id, projection] of this.projections)
      if (!projection.followed && now - projection.lastUsed >= this.deps.lingerMs) {
        this.projections.delete(id);
        this.behind.delete(projection);
        projection.end('shutdown');
      }
    return this.projections.size === 0;
  }

  end(reason: FollowEnd): void {
    if (this.ended) return;
    this.ended = reason;
    if (this.retry) clearTimeout(this.retry);
    this.subscription?.close();
    this.subscription = null;
    for (const projection of this.projections.values()) projection.end(reason);
    this.projections.clear();
    this.behind.clear();
    this.onEnded(this);
  }

  private subscribe(): void {
    if (this.ended) return;
    this.subscription = this.deps.core.subscribe(this.capsule, {
      after: this.cursor,
      surface: 'flue',
      onRecords: (records) => this.dispatch(records),
      onEnd: (reason) => this.onSubscriptionEnd(reason),
    });
  }

  private onSubscriptionEnd(reason: SubscriptionEnd): void {
    this.subscription = null;
    if (this.ended || reason === 'closed') return;
    if (reason === 'shutdown') return this.end('shutdown');
    // Slow or a store error: resume from the cursor unless what follows it is gone meanwhile.
    const resume = async (): Promise<void> => {
      this.retry = null;
      if (this.ended) return;
      try {
        const { status, position } = await this.deps.core.cursorStatus(this.capsule, this.cursor);
        if (this.ended) return;
        if (status === 'gone' || position.epoch !== this.epoch) return this.end('gone');
        this.subscribe();
      } catch (err) {
        this.deps.logger.warn({ err, capsule: this.capsule }, 'flue: live feed cannot resume yet');
        this.retry = setTimeout(() => void resume(), this.deps.retryMs);
      }
    };
    void resume();
  }

  private dispatch(records: readonly LogRecord[]): void {
    if (this.ended) return;
    // A new store generation: every state and offset of this feed belongs to the old one.
    if (records.some(isStoreReset)) return this.end('gone');
    this.deps.observe?.(this.capsule, this.epoch, this.cursor, records);
    for (let i = 0; i < records.length; i += UPDATES_PAGE) {
      const page = records.slice(i, i + UPDATES_PAGE);
      const last = i + UPDATES_PAGE >= records.length;
      this.cycle(page, last && page.length < UPDATES_PAGE, !last);
    }
  }

  /**
   * One read cycle: project each record once into the projections it concerns, then advance all.
   * `more`: another page of the same delivery follows (see SharedProjection.advance).
   */
  private cycle(records: readonly LogRecord[], upToDate: boolean, more: boolean): void {
    const start = this.cursor;
    const end = records[records.length - 1]!.offset;
    const produced = new Map<SharedProjection, FlueChunk[]>();
    const add = (projection: SharedProjection, chunks: FlueChunk[]): void => {
      if (chunks.length === 0) return;
      const list = produced.get(projection);
      if (list) list.push(...chunks);
      else produced.set(projection, chunks);
    };
    for (const record of records) {
      const context = this.tracker.contextOf(record);
      if (context !== null) {
        const projection = this.projections.get(context);
        if (projection) add(projection, projection.project(record));
        continue;
      }
      const taskId = viewFrame(record)?.taskId ?? null;
      if (record.kind !== 'fact' && !taskId) continue;
      if (taskId && this.unowned.has(taskId)) continue;
      // A fact, or a frame of a task whose attributing frame came before this feed: every
      // projection judges it with its own attribution, and the feed learns from the one that owns it.
      let judged = true;
      let owned = false;
      for (const projection of this.projections.values()) {
        add(projection, projection.project(record));
        if (!projection.projector) judged = false;
        const owner = projection.projector?.lastContext;
        if (taskId && owner === projection.conversationId) {
          this.tracker.link(taskId, owner);
          owned = true;
        }
      }
      if (taskId && judged && !owned) {
        if (this.unowned.size >= MAX_UNOWNED) this.unowned.clear();
        this.unowned.add(taskId);
      }
    }
    this.cursor = end;
    const controlText = encodeControlEvent(formatOffset(this.epoch, end), upToDate);
    const control = Buffer.from(controlText);
    // Most conversations of a busy capsule have nothing in a given cycle: those visited share one
    // empty slice, and most are not visited at all.
    let empty: Slice | null = null;
    const sliceOf = (chunks: FlueChunk[] | undefined): Slice =>
      chunks
        ? new Slice(start, end, upToDate, chunks, control, controlText)
        : (empty ??= new Slice(start, end, upToDate, [], control, controlText));
    // A delivery that ended on a full page tells every follower it is not up to date (rare).
    const everyone = !more && !upToDate;
    for (const projection of everyone ? this.projections.values() : produced.keys())
      this.advance(projection, sliceOf(produced.get(projection)), more);
    if (everyone || more) return;
    // The end of a delivery: whoever was told "behind" hears it is up to date again.
    for (const projection of this.behind)
      if (!produced.has(projection)) this.advance(projection, sliceOf(undefined), more);
  }

  /** Hand a projection its slice; keep `behind` to what its followers were last told. */
  private advance(projection: SharedProjection, slice: Slice, more: boolean): void {
    projection.advance(slice, more);
    if (projection.upToDate) this.behind.delete(projection);
    else this.behind.add(projection);
  }
}
