/**
 * The Flue side of a capsule's live feed (src/hub/live-feed.ts: one hub subscription per capsule in
 * this process, its resumes and cursor checks): records are dispatched to the shared projection of
 * the conversation they belong to (frames of tasks not yet attributed and facts go to every
 * projection). Each hub batch is cut into read cycles of at most one updates page, and each
 * cycle's `event: control` is encoded once for all conversations. A lost or trimmed cursor, or a new
 * store generation, ends every follower as 'gone' (the feed ends `gone`).
 */
import type { Logger } from 'pino';
import type { GatewayCore } from '../../src/core/types.js';
import type { FeedEnd, FeedSink, LiveFeed } from '../../src/hub/live-feed.js';
import { viewFrame } from '../../src/log/frame-view.js';
import type { LogRecord } from '../../src/log/record.js';
import type { FlueChunk } from './chunks.js';
import { encodeControlEvent, formatOffset } from './codec.js';
import { UPDATES_PAGE } from './constants.js';
import type { ConversationProjector } from './projection.js';
import { SharedProjection, Slice } from './shared-projection.js';

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
}

export type FlueLiveFeed = LiveFeed<SharedProjection, CapsuleFeed>;

export class CapsuleFeed implements FeedSink {
  private readonly projections = new Map<string, SharedProjection>();
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
  /** The store generation the feed follows (a store reset ends it). */
  readonly epoch: number;

  constructor(
    private readonly deps: FeedDeps,
    private readonly feed: FlueLiveFeed,
    epoch: number,
  ) {
    this.epoch = epoch;
  }

  get capsule(): string {
    return this.feed.capsule;
  }

  /** Offset of the last record dispatched. */
  get cursor(): number {
    return this.feed.cursor;
  }

  get ended(): FeedEnd | null {
    return this.feed.ended;
  }

  get closed(): boolean {
    return this.feed.closed;
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
      this.feed.add(projection, conversationId);
      this.behind.add(projection);
      this.unowned.clear();
      const created = projection;
      // A failed rebuild (store down) is its waiters' error; the next reader tries afresh.
      created.ready.catch(() => {
        if (this.projections.get(conversationId) !== created) return;
        this.projections.delete(conversationId);
        this.behind.delete(created);
        this.feed.remove(created);
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

  /** Drop projections nobody followed for `lingerMs`; the feed closes with the last one. */
  sweep(now: number): void {
    for (const [id, projection] of this.projections)
      if (!projection.followed && now - projection.lastUsed >= this.deps.lingerMs) {
        this.projections.delete(id);
        this.behind.delete(projection);
        projection.end('shutdown');
        this.feed.remove(projection);
      }
  }

  /** End every follower ('gone': the store lost or trimmed what follows; 416 on reconnect). */
  end(reason: FeedEnd): void {
    this.feed.end(reason);
  }

  onEnd(reason: FeedEnd): void {
    for (const projection of this.projections.values()) projection.end(reason);
    this.projections.clear();
    this.behind.clear();
  }

  onRecords(records: readonly LogRecord[], before: number): void {
    this.deps.observe?.(this.capsule, this.epoch, before, records);
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
    // One projection per conversation: the feed's index of this context holds at most it.
    this.feed.dispatch(
      records,
      (projection, record) => add(projection, projection.project(record)),
      (record) => this.broadcast(record, add),
    );
    this.feed.passed(end);
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

  /**
   * A record the feed cannot attribute: a fact, or a frame of a task whose attributing frame came
   * before this feed. Every projection judges it with its own attribution, and the feed learns
   * from the one that owns it.
   */
  private broadcast(
    record: LogRecord,
    add: (projection: SharedProjection, chunks: FlueChunk[]) => void,
  ): void {
    const taskId = viewFrame(record)?.taskId ?? null;
    if (record.kind !== 'fact' && !taskId) return;
    if (taskId && this.unowned.has(taskId)) return;
    let judged = true;
    let owned = false;
    for (const projection of this.projections.values()) {
      add(projection, projection.project(record));
      if (!projection.projector) judged = false;
      const owner = projection.projector?.lastContext;
      if (taskId && owner === projection.conversationId) {
        this.feed.link(taskId, owner);
        owned = true;
      }
    }
    if (taskId && judged && !owned) {
      if (this.unowned.size >= MAX_UNOWNED) this.unowned.clear();
      this.unowned.add(taskId);
    }
  }

  /** Hand a projection its slice; keep `behind` to what its followers were last told. */
  private advance(projection: SharedProjection, slice: Slice, more: boolean): void {
    projection.advance(slice, more);
    if (projection.upToDate) this.behind.delete(projection);
    else this.behind.add(projection);
  }
}
