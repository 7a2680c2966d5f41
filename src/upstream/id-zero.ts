/**
 * Id-0 accounting: each task attempt's first frame (its `working` status, id 0) is never replayed
 * from 0 (spec "Replay"), so an attempt that began while we were away is only revealed by a later
 * frame of it. These rules find such attempts so the log can say a frame is possibly missing there.
 */
import type { SseFrame as AlignFrame } from './sse-frames.js';

/** Ids above this are not from a task's counter (chunk launch value, input-wait, queued-cancel). */
const TASK_COUNTER_LIMIT = 2305843009213693951n;

export const idValue = (id: string | null): bigint | null => {
  if (id === null || !/^\d+$/.test(id)) return null;
  return BigInt(id);
};

/**
 * A task-counter id as a number, or null for anything else (no id, not decimal, at or above the
 * limit). Called for every ingested frame: short ids (all real counters) skip the BigInt. Only 0, 1
 * and "above 1" matter to the rules below, so a long id's lost precision changes nothing.
 */
const counterValue = (id: string | null): number | null => {
  if (id === null || id.length === 0) return null;
  if (id.length <= 15) {
    for (let i = 0; i < id.length; i++) {
      const c = id.charCodeAt(i);
      if (c < 48 || c > 57) return null;
    }
    return Number(id);
  }
  const big = idValue(id);
  return big === null || big >= TASK_COUNTER_LIMIT ? null : Number(big);
};

const TASK_PREFIX = '{"id":"';

export const taskOf = (f: AlignFrame): string | null => {
  // The capsule writes `id` first (spec examples): read it without a parse (or a regex match array:
  // this runs for every ingested frame). An id with an escape in it takes the parse.
  const { data } = f;
  if (data.startsWith(TASK_PREFIX)) {
    const end = data.indexOf('"', TASK_PREFIX.length);
    if (end > 0) {
      const id = data.slice(TASK_PREFIX.length, end);
      if (!id.includes('\\')) return id;
    }
  }
  try {
    const parsed = JSON.parse(f.data) as { id?: unknown };
    return typeof parsed.id === 'string' ? parsed.id : null;
  } catch {
    return null;
  }
};

/**
 * Kept up to date frame by frame: a frame with id `1` is the second frame of a task attempt (the
 * task counter starts at 0 per attempt, spec "Event ids"); its attempt's id-0 `working` status is
 * held only if the task's latest task-counter frame before it is id 0 (or 1: ids may repeat); a
 * task-counter frame right after the task's final status opens a reopened attempt.
 */
/** What `admit` found of a frame about to be released. */
export type Admission = 'skips' | 'opens-over-unended' | 'reveals-id-zero' | 'clear';

export class IdZeroTracker {
  /**
   * Per task: the latest task-counter id, whether that frame was a final status, and `at`, the
   * count of insertions when the task was last (re)inserted: the map iterates oldest first, so the
   * first key is the one to forget.
   */
  private readonly last = new Map<string, { id: number; final: boolean; at: number }>();
  private inserted = 0;
  /** The task of the last task-counter frame noted. */
  private current: string | null = null;

  constructor(private readonly maxTasks = 4096) {}

  /** Record a frame; true when it reveals an id-0 frame we never received. */
  note(f: AlignFrame): boolean {
    const id = counterValue(f.upstreamId);
    const task = id === null ? null : taskOf(f);
    return id !== null && task !== null && this.noteAt(f, id, task);
  }

  /**
   * One look at a frame about to be released (its id and task read once: this runs per ingested
   * frame). With `watch`, first whether it proves a run dropped just before it on this connection:
   * the capsule drops the oldest of a live queue past 128 frames without a trace (spec "Frames a
   * connection misses"). Within an attempt a task-counter id never moves more than one past the last
   * (repeats and lower values happen, spec "Event ids"); a task never seen starts at 0, or at 1 when
   * its id-0 status was not replayed, and only once the task before it ended; after a final status
   * only the next id (a hook's frame) or a new attempt's 0 or 1 follow. Such a frame is `skips` and
   * is not noted, unless `accept(f)`. Any other frame is noted; the answer says which fact, if any,
   * goes before it: `opens-over-unended` (a new task's first status while the task before it has not
   * ended: a run took that task's end; a `rejected` status, always id 0, answers another task while
   * one runs, and is not one) or `reveals-id-zero` (as `note`).
   */
  admit(f: AlignFrame, watch: boolean, accept: (f: AlignFrame) => boolean): Admission {
    const id = counterValue(f.upstreamId);
    const task = id === null ? null : taskOf(f);
    if (id === null || task === null) return 'clear';
    if (watch) {
      if (this.skipsAhead(id, task) && !accept(f)) return 'skips';
      if (
        id === 0 &&
        f.event === 'status' &&
        !f.data.includes('"state":"rejected"') &&
        this.unendedOther(task)
      ) {
        this.noteAt(f, id, task);
        return 'opens-over-unended';
      }
    }
    return this.noteAt(f, id, task) ? 'reveals-id-zero' : 'clear';
  }

  private noteAt(f: AlignFrame, id: number, task: string): boolean {
    this.current = task;
    // The task's entry is updated in place (one object per task, not one per frame).
    const seen = this.last.get(task);
    const beforeId = seen?.id ?? 0;
    const beforeFinal = seen?.final ?? false;
    const now = seen ?? { id, final: false, at: 0 };
    now.id = id;
    now.final = f.event === 'status' && f.data.includes('"final":true');
    // Moved to the young end only once half the bound has been inserted after it, not on every frame
    // (a delete and a set per ingested frame showed in profiles): a task seen since then still
    // outlives at least maxTasks / 2 newer tasks before it can be forgotten.
    if (seen === undefined || this.inserted - now.at > this.maxTasks / 2) {
      if (seen !== undefined) this.last.delete(task);
      now.at = ++this.inserted;
      this.last.set(task, now);
      if (this.last.size > this.maxTasks) this.last.delete(this.last.keys().next().value!);
    }
    if (id === 0) return false;
    // A task-counter frame after the task's final status starts a reopened attempt (spec "status":
    // ids start again at 0); ids may repeat within an attempt (a whole-reply `text` and the status
    // after it can share one), so otherwise only a fall back to 1, or a task never seen, marks one.
    if (seen === undefined) return id === 1;
    return beforeFinal || (id === 1 && beforeId > 1);
  }

  /** `admit`'s dropped-run rule, for a task-counter frame of `task` with id `id`. */
  private skipsAhead(id: number, task: string): boolean {
    if (id === 0) return false;
    const seen = this.last.get(task);
    if (seen === undefined) return id > 1 || this.unendedOther(task);
    if (id === 1) return false;
    return seen.final ? id !== seen.id + 1 : id > seen.id + 1;
  }

  /** Whether the task of the last task-counter frame is another one, and has not ended. */
  private unendedOther(task: string): boolean {
    const current = this.current;
    if (current === null || current === task) return false;
    const open = this.last.get(current);
    return open !== undefined && !open.final;
  }

  reset(): void {
    this.last.clear();
    this.current = null;
  }
}
