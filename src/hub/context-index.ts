/**
 * Which offsets of one capsule's log belong to which context (Flue conversation, BeeOS channel), so
 * a read of one context costs O(that context) instead of O(the capsule). Fed records in log order,
 * each once, by `context-reads.ts`; attribution is the surfaces' own (`ContextTracker`), and every
 * record it cannot attribute (facts, frames of tasks not seen with a context yet) is kept in a list
 * that every context read includes: a projector reading one context then sees every record it would
 * have used from a whole-capsule read. Pure and synchronous; one instance per capsule and epoch.
 */
import { viewFrame } from '../log/frame-view.js';
import type { LogRecord } from '../log/record.js';

/**
 * Ascending offsets, 8 bytes each (offsets sit above a µs time floor, so V8 keeps them as unboxed
 * doubles). Retention trims from the front: `start` skips dropped entries, compacted now and then.
 */
export class OffsetList {
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
  /** Offsets of the context and of unattributed records, > after, ascending, at most `limit`. */
  offsets: number[];
  /** The offset the selection is complete through (see GatewayCore.readContext). */
  next: number;
}

export class ContextIndex {
  /** Highest offset fed (records up to it are indexed). 0 before the first record. */
  through = 0;
  private records = 0;
  /** Offsets below this were swept from every list (see trim). */
  private trimmedTo = 0;
  private readonly contexts = new Map<string, OffsetList>();
  private readonly unattributed = new OffsetList();
  /** Context of each task still running (ContextTracker keeps every task ever: see attribute). */
  private readonly openTasks = new Map<string, string>();

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
      const context = this.attribute(record);
      let list = this.unattributed;
      if (context !== null) {
        const known = this.contexts.get(context);
        list = known ?? new OffsetList();
        if (!known) this.contexts.set(context, list);
      }
      list.push(record.offset);
      this.through = record.offset;
      this.records++;
    }
    return true;
  }

  /**
   * ContextTracker's attribution, except that a task is forgotten at its final status, so memory is
   * per running task rather than per task ever run. The frames the spec lets follow a final status
   * (an `input-timeout` failure's artifact; a reopened attempt, which starts with a status naming its
   * context again) then count as unattributed, which every context's read includes: a superset of
   * what ContextTracker gives that context, never less.
   */
  private attribute(record: LogRecord): string | null {
    if (record.kind === 'submission') return record.contextId;
    const view = viewFrame(record);
    if (!view || !view.taskId) return null;
    const context = view.contextId ?? this.openTasks.get(view.taskId) ?? null;
    if (view.event === 'status' && view.final) this.openTasks.delete(view.taskId);
    else if (view.contextId) this.openTasks.set(view.taskId, view.contextId);
    return context;
  }

  /** Nothing exists after `through` up to `head` (an empty read): indexed through `head`. */
  reachedHead(head: number): void {
    if (head > this.through) this.through = head;
  }

  /**
   * The context's offsets and the unattributed ones after `after`, at most `limit`, merged in order.
   * Offsets below `first` (trimmed) are dropped from the index on the way.
   */
  select(contextId: string, after: number, limit: number, first: number): ContextSelection {
    this.trim(first);
    const own = this.contexts.get(contextId);
    const shared = this.unattributed;
    const offsets: number[] = [];
    // Trimmed offsets may still be listed (trim is amortised): start at `first` at the lowest.
    const from = Math.max(after, first - 1);
    let i = own ? own.indexAfter(from) : 0;
    let j = shared.indexAfter(from);
    while (offsets.length < limit) {
      const a = own?.at(i);
      const b = shared.at(j);
      if (a === undefined && b === undefined) break;
      if (b === undefined || (a !== undefined && a < b)) {
        offsets.push(a!);
        i++;
      } else {
        offsets.push(b);
        j++;
      }
    }
    const more = own?.at(i) !== undefined || shared.at(j) !== undefined;
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

  stats(): { contexts: number; records: number } {
    return { contexts: this.contexts.size, records: this.records };
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
    let kept = this.unattributed.size;
    this.unattributed.dropBelow(first);
    let dropped = kept - this.unattributed.size;
    for (const [context, list] of this.contexts) {
      kept = list.size;
      list.dropBelow(first);
      dropped += kept - list.size;
      if (list.size === 0) this.contexts.delete(context);
    }
    this.records -= dropped;
  }
}
