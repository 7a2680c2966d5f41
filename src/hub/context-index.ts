/**
 * Which offsets of one capsule's log belong to which context (Flue conversation, BeeOS channel), so
 * a read of one context costs O(that context) instead of O(the capsule). Fed records in log order,
 * each once, by `context-reads.ts`. Attribution is the surfaces' own (`ContextTracker`: a frame belongs
 * to its task's context, learnt from the task's frames that name it, or from a submission that names
 * the task). Three kinds of list:
 * - one per context: its submissions and its tasks' frames;
 * - one per task whose context is not known yet (a task that was running when the gateway attached,
 *   or whose first frames were lost): read by nobody until a later record names its context, when the
 *   list joins that context's, in offset order;
 * - one for the records that concern every context (facts: loss, store resets, capsule restarts;
 *   frames of no task), which every context read includes.
 * A read visits its own list and the shared one, whatever else the log holds. Pure and synchronous;
 * one instance per capsule and epoch.
 */
import { viewFrame } from '../log/frame-view.js';
import type { LogRecord } from '../log/record.js';

/**
 * Ascending offsets, 8 bytes each (offsets sit above a µs time floor, so V8 keeps them as unboxed
 * doubles). Retention trims from the front: `start` skips dropped entries, compacted now and then.
 */
class OffsetList {
  private items: number[] = [];
  private start = 0;

  get size(): number {
    return this.items.length - this.start;
  }

  push(offset: number): void {
    this.items.push(offset);
  }

  /** The first offset kept, or null. */
  first(): number | null {
    return this.items[this.start] ?? null;
  }

  /** Index (into items) of the first offset > after. */
  indexAfter(after: number): number {
    let lo = this.start;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.items[mid]! <= after) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  at(i: number): number | undefined {
    return this.items[i];
  }

  /** The offsets kept, ascending. */
  values(): number[] {
    return this.items.slice(this.start);
  }

  /** Take every offset of `other` into this list, keeping the order (other is left as it was). */
  mergeFrom(other: OffsetList): void {
    const a = this.values();
    const b = other.values();
    const merged: number[] = new Array<number>(a.length + b.length);
    let i = 0;
    let j = 0;
    for (let k = 0; k < merged.length; k++) {
      merged[k] = j >= b.length || (i < a.length && a[i]! < b[j]!) ? a[i++]! : b[j++]!;
    }
    this.items = merged;
    this.start = 0;
  }

  /** Forget offsets below `first` (trimmed by retention). */
  dropBelow(first: number): void {
    const head = this.items[this.start];
    if (head === undefined || head >= first) return;
    this.start = this.indexAfter(first - 1);
    if (this.start > 1024 && this.start * 2 > this.items.length) {
      this.items = this.items.slice(this.start);
      this.start = 0;
    }
  }
}

export interface ContextSelection {
  /** Offsets of the context and of the records of every context, > after, ascending, at most `limit`. */
  offsets: number[];
  /** The offset the selection is complete through (see GatewayCore.readContext). */
  next: number;
}

/** Where a record is listed. */
type Listing = { context: string } | { task: string } | null;

/** A submission that names the capsule task it became (BeeOS's accepted outcome): the task's link. */
const linkedTask = (meta: Record<string, unknown> | undefined): string | null =>
  meta?.op === 'outcome' && typeof meta.taskId === 'string' ? meta.taskId : null;

export class ContextIndex {
  /** Highest offset fed (records up to it are indexed). 0 before the first record. */
  through = 0;
  private records = 0;
  /** Offsets below this were swept from every list (see trim). */
  private trimmedTo = 0;
  private readonly contexts = new Map<string, OffsetList>();
  /** Records that concern every context. */
  private readonly everyContext = new OffsetList();
  /** Frames of tasks whose context no record has named yet. */
  private readonly unknownTasks = new Map<string, OffsetList>();
  /**
   * Each task's context and its last offset, as ContextTracker keeps it (every task, so the frames the
   * spec lets follow a final status stay with their context); swept with retention (see trim).
   */
  private readonly taskContext = new Map<string, { context: string; last: number }>();

  constructor(readonly epoch: number) {}

  /**
   * Index `records`, all the log's records after `after` up to the last one's offset (a store page
   * or a tail batch). A page that would leave a hole after `through` is refused (false): the caller
   * reads the hole from the store instead. Records at or below `through` were indexed already.
   */
  feed(after: number, records: readonly LogRecord[]): boolean {
    if (after > this.through) return false;
    for (const record of records) {
      if (record.offset <= this.through) continue;
      const listing = this.listing(record);
      this.listOf(listing).push(record.offset);
      this.through = record.offset;
      this.records++;
    }
    return true;
  }

  private listOf(listing: Listing): OffsetList {
    if (listing === null) return this.everyContext;
    const [map, key] =
      'context' in listing ? [this.contexts, listing.context] : [this.unknownTasks, listing.task];
    let list = map.get(key);
    if (!list) map.set(key, (list = new OffsetList()));
    return list;
  }

  /** ContextTracker's attribution, with a task of no known context listed under its own id. */
  private listing(record: LogRecord): Listing {
    if (record.kind === 'submission') {
      const task = linkedTask(record.meta);
      if (task !== null) this.link(task, record.contextId, record.offset);
      return { context: record.contextId };
    }
    // The capsule took a queued submission as this task: the link even when its frames name no context.
    if (record.kind === 'fact' && record.fact === 'submission-started') {
      this.link(record.taskId, record.contextId, record.offset);
      return null;
    }
    const view = viewFrame(record);
    if (!view || !view.taskId) return null;
    if (view.contextId) this.link(view.taskId, view.contextId, record.offset);
    const known = this.taskContext.get(view.taskId);
    if (!known) return { task: view.taskId };
    known.last = record.offset;
    return { context: known.context };
  }

  /** The task belongs to `context` from now on; what was listed under the task joins the context. */
  private link(task: string, context: string, offset: number): void {
    this.taskContext.set(task, { context, last: offset });
    const pending = this.unknownTasks.get(task);
    if (!pending) return;
    this.unknownTasks.delete(task);
    this.listOf({ context }).mergeFrom(pending);
  }
  /** Nothing exists after `through` up to `head` (an empty read): indexed through `head`. */
  reachedHead(head: number): void {
    if (head > this.through) this.through = head;
  }

  /**
   * The context's offsets and every context's after `after`, at most `limit`, merged in order, with
   * the frames still waiting under any of `tasks`: tasks the reader knows to be the context's from
   * outside the log read so far (a BeeOS channel's accepted submissions, known before their outcome
   * record is durable or after it aged out), whose projector takes their frames as its own.
   * Offsets below `first` (trimmed) are dropped from the index on the way.
   */
  select(
    contextId: string,
    after: number,
    limit: number,
    first: number,
    tasks: readonly string[] = [],
  ): ContextSelection {
    this.trim(first);
    const lists: OffsetList[] = [this.everyContext];
    const own = this.contexts.get(contextId);
    if (own) lists.push(own);
    for (const task of tasks) {
      const pending = this.unknownTasks.get(task);
      if (pending && !lists.includes(pending)) lists.push(pending);
    }
    const offsets: number[] = [];
    // Trimmed offsets may still be listed (trim is amortised): start at `first` at the lowest.
    const from = Math.max(after, first - 1);
    const at = lists.map((list) => list.indexAfter(from));
    let more = false;
    for (;;) {
      let pick = -1;
      let lowest = Infinity;
      for (let k = 0; k < lists.length; k++) {
        const offset = lists[k]!.at(at[k]!);
        if (offset !== undefined && offset < lowest) [pick, lowest] = [k, offset];
      }
      if (pick < 0) break;
      if (offsets.length >= limit) {
        more = true;
        break;
      }
      offsets.push(lowest);
      at[pick]!++;
    }
    // Cut short by `limit`: complete through the last offset selected (`after` when none was).
    const next = more ? (offsets[offsets.length - 1] ?? after) : Math.max(after, this.through);
    return { offsets, next };
  }

  /** The context's first retained offset, or null when the index holds none of its records. */
  firstOf(contextId: string, first: number): number | null {
    const list = this.contexts.get(contextId);
    list?.dropBelow(first);
    return list?.first() ?? null;
  }

  stats(): { contexts: number; records: number; unknownTasks: number } {
    return { contexts: this.contexts.size, records: this.records, unknownTasks: this.unknownTasks.size };
  }

  /**
   * Forget trimmed offsets, amortised: a sweep of every context runs only once a quarter of the
   * indexed span is gone (offsets are consecutive within an epoch), so a read under count retention,
   * where `first` moves on every append, does not walk the other contexts each time.
   */
  private trim(first: number): void {
    const span = this.through - this.trimmedTo;
    if (first <= this.trimmedTo || (first - this.trimmedTo) * 4 < span) return;
    this.trimmedTo = first;
    let kept = this.everyContext.size;
    this.everyContext.dropBelow(first);
    let dropped = kept - this.everyContext.size;
    for (const lists of [this.contexts, this.unknownTasks]) {
      for (const [key, list] of lists) {
        kept = list.size;
        list.dropBelow(first);
        dropped += kept - list.size;
        if (list.size === 0) lists.delete(key);
      }
    }
    for (const [task, { last }] of this.taskContext) if (last < first) this.taskContext.delete(task);
    this.records -= dropped;
  }
}
