/**
 * What this process itself appended to each capsule's Redis log, kept briefly so the same process's
 * tail (the hub's waitAfter loop) reads its own appends without a Redis round trip. The owner of a
 * busy capsule otherwise paid an XREAD wake for every append it had just made: one of the two Redis
 * calls per event of its fan-out.
 *
 * Exact by construction: append.lua minted these offsets for these entries atomically, so the
 * stream holds exactly them there. A page is answered from here only when it continues the cursor
 * contiguously within one epoch; anything else (another replica's record in between, a new epoch,
 * records this process never saw) goes to Redis as before.
 */
import type { LogRecord } from './record.js';

/** Unread records kept per capsule: a tail reads them within a turn or two; a stalled one reads Redis. */
const KEEP = 1024;

interface Tail {
  epoch: number;
  records: LogRecord[];
  /**
   * When this process last appended frames here (ms, monotonic enough: Date.now): it ingests the
   * capsule, so its next append is near. A replica that only admitted a submission (or wrote a
   * surface record) does not count: the capsule's frames come from its owner, through Redis, and a
   * tail waiting for this process's next append would hold the reply's first token back.
   */
  at: number;
  wakers: Set<() => void>;
}

export class OwnTails {
  private readonly tails = new Map<string, Tail>();

  /** Records just appended (offsets minted by append.lua), in offset order. */
  note(capsule: string, epoch: number, records: LogRecord[]): void {
    let tail = this.tails.get(capsule);
    if (!tail || tail.epoch !== epoch) {
      tail = { epoch, records: [], at: 0, wakers: tail?.wakers ?? new Set() };
      this.tails.set(capsule, tail);
    }
    let frames = false;
    for (const r of records) {
      tail.records.push(r);
      if (r.kind === 'frame') frames = true;
    }
    if (tail.records.length > KEEP) tail.records.splice(0, tail.records.length - KEEP);
    if (frames) tail.at = Date.now();
    const wakers = [...tail.wakers];
    tail.wakers.clear();
    for (const wake of wakers) wake();
  }

  /** Forget a capsule's tail (an append that reset the epoch or was not applied as sent). */
  forget(capsule: string): void {
    const tail = this.tails.get(capsule);
    if (tail) tail.records = [];
  }

  /**
   * The records after `after` (at most `limit`) when they are ours and continue it: the first is
   * `after + 1`, all of `epoch`, no hole. Null otherwise.
   */
  page(capsule: string, after: number, limit: number, epoch: number): LogRecord[] | null {
    const tail = this.tails.get(capsule);
    if (!tail || tail.epoch !== epoch || limit <= 0) return null;
    const { records } = tail;
    // Ours are contiguous runs; find after + 1 from the newest end (a tail reads near the end).
    let i = records.length - 1;
    while (i >= 0 && records[i]!.offset > after + 1) i--;
    if (i < 0 || records[i]!.offset !== after + 1) return null;
    const out: LogRecord[] = [];
    let next = after + 1;
    for (; i < records.length && out.length < limit; i++) {
      const r = records[i]!;
      if (r.offset !== next) break; // another writer's record sits in between: Redis has it
      out.push(r);
      next++;
    }
    // The tail moves on from here: what it has read is not asked for again (it is held only for a
    // capsule no tail reads, up to KEEP).
    records.splice(0, i);
    return out;
  }

  /** Whether this process appended frames to `capsule` within the last `ms` (it ingests it). */
  appendedWithin(capsule: string, ms: number): boolean {
    const tail = this.tails.get(capsule);
    return tail !== undefined && Date.now() - tail.at <= ms;
  }

  /** Resolves at this process's next append to `capsule`, after `ms`, or on abort, whichever first. */
  next(capsule: string, ms: number, signal?: AbortSignal): Promise<void> {
    const tail = this.tails.get(capsule);
    if (!tail || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        tail.wakers.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      tail.wakers.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
