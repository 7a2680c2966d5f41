/**
 * A capsule channel's memory of records: disjoint runs of consecutive offsets, all of one epoch, at
 * most `max` records in all (the lowest offsets go first). The tail loop extends the newest run; a
 * catch-up read from the store adds what it read, merged with the runs it touches. A record already
 * held keeps its object, so every reader of an offset gets the same object and per-record encodings
 * (SSE bytes, poll JSON) are computed once per process, not once per reader.
 *
 * A run only ever holds records read from the store in order with no offset jump inside, so it is a
 * true slice of the log: answering from it is answering what the store held when it was read.
 */
import type { LogRecord } from '../log/record.js';

interface Run {
  records: LogRecord[];
  /** records[start] is the oldest kept (dropping the oldest is O(1) amortised). */
  start: number;
}

const firstOf = (run: Run): number => run.records[run.start]!.offset;
const lastOf = (run: Run): number => run.records[run.records.length - 1]!.offset;
const sizeOf = (run: Run): number => run.records.length - run.start;

/** The records after the last offset jump in `records` (the last run of consecutive offsets). */
export const lastConsecutive = (records: readonly LogRecord[]): readonly LogRecord[] => {
  let from = records.length;
  while (from > 1 && records[from - 1]!.offset === records[from - 2]!.offset + 1) from--;
  return from > 1 ? records.slice(from - 1) : records;
};

const MAX_SLICES = 256;

export class RecordMemory {
  /** Ascending by offset, disjoint and never adjacent (adjacent runs are merged). */
  private runs: Run[] = [];
  private total = 0;
  /** Pages handed out recently, by `offset:limit` (oldest first). */
  private slices = new Map<string, readonly LogRecord[]>();

  constructor(private readonly max: number) {}

  get size(): number {
    return this.total;
  }

  /** How many separate runs are held (tests and stats). */
  get runCount(): number {
    return this.runs.length;
  }

  clear(): void {
    this.runs = [];
    this.total = 0;
    this.slices = new Map();
  }

  /** The lowest and highest offsets of the run holding `offset`, or null. */
  runAround(offset: number): { first: number; last: number } | null {
    const run = this.find(offset);
    return run ? { first: firstOf(run), last: lastOf(run) } : null;
  }

  /**
   * Up to `limit` records from `offset` on, all from the run holding `offset`; null when none does.
   * The same page asked again is the same array (until it would differ), so what a reader derives
   * from a page (a surface's encoded bytes of it) can be cached per array and shared by a storm.
   */
  slice(offset: number, limit: number): readonly LogRecord[] | null {
    const run = this.find(offset);
    if (!run) return null;
    const from = run.start + (offset - firstOf(run));
    const length = Math.min(limit, run.records.length - from);
    const key = `${offset}:${limit}`;
    const hit = this.slices.get(key);
    // Records at an offset never change within an epoch: a page of the right length is this page.
    if (hit && hit.length === length) return hit;
    const page = run.records.slice(from, from + length);
    if (hit) this.slices.delete(key);
    this.slices.set(key, page);
    if (this.slices.size > MAX_SLICES) this.slices.delete(this.slices.keys().next().value!);
    return page;
  }

  /**
   * A tail batch (records after everything the tail read before). Offsets index memory only within
   * a run: a jump at the batch's start (retention trimmed records before the tail read them) starts
   * a new run; a jump inside it (it spans a new epoch) keeps only what follows the last jump.
   */
  append(batch: readonly LogRecord[]): void {
    const records = lastConsecutive(batch);
    const head = records[0];
    if (!head) return;
    if (records !== batch) this.clear(); // records before the jump belong to another epoch
    const newest = this.runs[this.runs.length - 1];
    if (newest && lastOf(newest) >= head.offset) {
      // Never expected (the tail reads above what memory holds); a stale view is worse than none.
      this.clear();
    }
    const last = this.runs[this.runs.length - 1];
    if (last && lastOf(last) + 1 === head.offset) {
      for (const record of records) last.records.push(record);
    } else {
      this.runs.push({ records: [...records], start: 0 });
    }
    this.total += records.length;
    this.evict();
  }

  /**
   * Records read from the store (consecutive offsets, all of the current epoch). Offsets already held
   * keep their objects; touching or adjacent runs become one.
   */
  absorb(records: readonly LogRecord[]): void {
    const head = records[0];
    const tail = records[records.length - 1];
    if (!head || !tail) return;
    const lo = head.offset;
    const hi = tail.offset;
    // Runs that overlap or touch [lo, hi]: a contiguous stretch of the sorted list.
    let i = 0;
    while (i < this.runs.length && lastOf(this.runs[i]!) < lo - 1) i++;
    let j = i;
    while (j < this.runs.length && firstOf(this.runs[j]!) <= hi + 1) j++;
    const touched = this.runs.slice(i, j);
    const only = touched.length === 1 ? touched[0]! : null;
    if (only && firstOf(only) <= lo && lastOf(only) >= hi) return; // held already
    if (only && lastOf(only) + 1 === lo) {
      // Right after one run (a reader paging up through the log): extend it in place.
      for (const record of records) only.records.push(record);
      this.total += records.length;
      this.evict();
      return;
    }
    const from = Math.min(lo, ...touched.map(firstOf));
    const to = Math.max(hi, ...touched.map(lastOf));
    const merged = new Array<LogRecord>(to - from + 1);
    for (const record of records) merged[record.offset - from] = record;
    let held = 0;
    for (const run of touched) {
      held += sizeOf(run);
      for (let k = run.start; k < run.records.length; k++) {
        const record = run.records[k]!;
        merged[record.offset - from] = record;
      }
    }
    this.runs.splice(i, j - i, { records: merged, start: 0 });
    this.total += merged.length - held;
    this.evict();
  }

  private find(offset: number): Run | null {
    let lo = 0;
    let hi = this.runs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const run = this.runs[mid]!;
      if (offset < firstOf(run)) hi = mid - 1;
      else if (offset > lastOf(run)) lo = mid + 1;
      else return run;
    }
    return null;
  }

  /** Drop the lowest offsets past the bound; compact a run now and then. */
  private evict(): void {
    while (this.total > this.max) {
      const run = this.runs[0]!;
      const drop = Math.min(sizeOf(run), this.total - this.max);
      run.start += drop;
      this.total -= drop;
      if (sizeOf(run) === 0) this.runs.shift();
      else if (run.start > sizeOf(run) && run.start > 1024) {
        run.records = run.records.slice(run.start);
        run.start = 0;
      }
    }
  }
}
