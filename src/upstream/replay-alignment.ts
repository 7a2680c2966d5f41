/**
 * Streaming replay alignment: after each `connection-ack`, decide frame by frame which arriving frames
 * the log already holds and which are new, by content alone, however the replay is split in time.
 *
 * Why by content: the wire does not delimit replay from live (spec "What stream/watch writes"), and a
 * network stall can hold a replay for any time partway. The replay is the session's most recent
 * history in write order, filtered by its id predicate (id > 0 from `Last-Event-ID: 0`), so the stored
 * tail filtered the same way must END with what the stream STARTS with. Each start position p of the
 * stored (filtered) tail is a candidate overlap stored[p..]; every arriving id>0 frame kills the
 * candidates it contradicts. The longest overlap still consistent with everything received wins, and
 * a frame is released as new only once no longer candidate can claim it. A frame that cannot be in a
 * replay (no id, id 0 without a `gap`, a heartbeat comment) proves the replay is over: candidates
 * longer than what arrived die then. So duplicates vs new never depends on timing.
 *
 * Timing only labels, and never withholds a fact: "capsule restarted" vs "no overlap" may be judged
 * on the replay's length when `hint()` (the caller's quiet window) says the burst is probably over.
 * But an overlap that content alone cannot tell from a coincidence (it lies inside one task, whose
 * reopened attempt repeats it byte for byte; or the stored tail is periodic) continues the log only if
 * the buffer never evicted, and that is proven by the replay's length once its END is proven (a frame
 * no replay holds, a heartbeat) or disproven by stored frames the replay no longer holds. A network
 * stall mid-replay looks just like its end to a timer, so until one of those proofs comes the frames
 * wait, up to `expire()` (the caller's longer window); then a fact says frames may be missing.
 * Such frames wait for the label, never for the decision.
 *
 * The capsule also drops runs of live frames from a connection that fell behind, without a trace
 * (spec "Frames a connection misses"), most often right behind a replay that filled the socket. The
 * frame after such a run skips ahead of its task (id-zero.ts `admit`): nothing from it on is
 * released, and a `reconnect` output asks for the replay that puts the run in its place.
 */
import type { MissingReason } from '../log/record.js';
import type { IdZeroTracker } from './id-zero.js';
import { idValue, taskOf } from './id-zero.js';
import type { SseFrame } from './sse-frames.js';

/** A frame as alignment sees it, the capsule's frame as read: compared on all three fields, byte for byte. */
export type AlignFrame = SseFrame;

export interface MissingFact {
  reason: MissingReason;
  firstAvailableId?: string;
  /** How many frames are known to be missing, when known (id-0 frames). */
  count?: number;
}

/** What the caller records, in this order. */
export type AlignOutput =
  | { kind: 'missing'; fact: MissingFact }
  /** A new capsule session begins here: record the boundary, start a new aligned tail. */
  | { kind: 'new-session' }
  | { kind: 'frame'; frame: AlignFrame };

/**
 * End this connection now and replay: what it lost is still in the capsule's buffer. `frame`: the
 * live frame that proved frames before it were dropped (nothing from it on was released).
 */
export type ReconnectOutput = {
  kind: 'reconnect';
  reason: 'lagged' | 'id hole' | 'another session' | 'frames skipped';
  frame?: AlignFrame;
};

/** The replay's id predicate (spec "Replay"): a replay from N without a gap holds frames with id > N. */
export const replayPredicate = (lastEventId: string, gap: boolean): ((frame: AlignFrame) => boolean) => {
  if (gap) return () => true;
  const n = idValue(lastEventId) ?? 0n;
  return (frame) => {
    const id = idValue(frame.upstreamId);
    return id !== null && id > n;
  };
};

export const frameKey = (f: AlignFrame): string => `${f.event}\u0000${f.upstreamId ?? ''}\u0000${f.data}`;

/**
 * Whether the replay is provably the session's whole history: the buffer never evicted. The buffer
 * also holds id-0 frames the replay skips; we bound them by two attempts per task seen (the default
 * `max_task_reopens` is 1) plus one task that wrote only its id-0 frame so far.
 */
export const replayIsWholeSession = (
  replay: readonly AlignFrame[],
  gap: boolean,
  bufferSize: number,
): boolean => {
  if (gap) return false; // a gap means the oldest buffered id is > 1: a fresh session starts at 0
  const tasks = new Set<string>();
  for (const f of replay) {
    const t = taskOf(f);
    if (t !== null) tasks.add(t);
  }
  return replay.length + 2 * tasks.size + 1 < bufferSize;
};

export interface AlignerInput {
  /** The last id-bearing frames stored for the current capsule session, oldest first. */
  storedTail: readonly AlignFrame[];
  /** Whether the log holds anything at all for this capsule (false: first contact). */
  hasHistory: boolean;
  /**
   * First contact with a capsule known to have written nothing before it (the demo starts its
   * workload once the gateway watches): an empty replay then proves nothing is missing, where
   * otherwise it could hide tasks that wrote only their never-replayed id-0 frame.
   */
  freshCapsule?: boolean;
  /** The capsule's replay buffer size (spec: 512). */
  bufferSize: number;
  /** Noted for every released frame; the caller's own, so id-0 accounting carries on after. */
  idZero: IdZeroTracker;
  /**
   * The frame that made the previous connection reconnect (`frames skipped`): if this replay still
   * shows the same skip, the capsule's buffer holds it so (nothing was dropped): it is taken as is.
   */
  acceptSkip?: AlignFrame | null;
  /**
   * False for a replay known to be whole (the tests' batch form, test/upstream/reconcile.ts): no
   * connection, so no run dropped from one.
   */
  watchDrops?: boolean;
  emit(out: AlignOutput | ReconnectOutput): void;
}

const isKey = replayPredicate('0', false);

/**
 * Before the overlap is decided: frames are held while a longer overlap may still claim them, or
 * while their label waits for a proof (see the header).
 */
interface Aligning {
  phase: 'aligning';
  /** Frames since the ack (and its leading gap), held until the overlap is decided. */
  held: AlignFrame[];
  /** Frames received before the replay's end was proven: the replay, as far as labels go. */
  replay: AlignFrame[];
  /** Candidate starts p in the filtered tail (overlap keys.length - p ≥ 1), ascending. */
  alive: number[];
  /** Key frames received. */
  keyCount: number;
  /** Frames received (a leading `gap` comes before the first). */
  received: number;
  gap: { firstAvailableId: string } | null;
  /** The replay's end: not shown yet, or proven (a frame no replay holds, a heartbeat, a batch's end). */
  end: 'open' | 'proven';
  /**
   * The caller's timing: nothing said yet; `hinted`, the burst is probably over (labels may be judged
   * on the replay's length); `expired`, it stopped waiting for the end to be proven (unproven
   * continuity is flagged).
   */
  patience: 'waiting' | 'hinted' | 'expired';
  /** Once no longer candidate can claim the held frames: its length k, and whether shorter ones match too. */
  overlap: { k: number; ambiguous: boolean } | null;
}

/** The overlap is decided and labelled: every frame from here on is released in order. */
interface Live {
  phase: 'live';
  /**
   * Right after the overlap, where a `gap` replay repeats the stored frames after our last key frame
   * (see `afterOverlap`): the next one it may repeat, until a key frame arrives (then null).
   */
  repeats: number | null;
  /**
   * The buffer holds every frame after the overlap in write order, and live frames follow it, so any
   * released frame that skips ahead of its task is the witness of a run dropped from this connection
   * (often right behind the replay, which still filled the socket). Only the first frame of a replay
   * that does not continue ours (no overlap, first contact, a gap) may begin inside a task.
   */
  firstMayStartInside: boolean;
}

/** A reconnect was asked for: nothing more of this connection is released. */
interface Stopped {
  phase: 'stopped';
}

export class ReplayAligner {
  private readonly keys: string[];
  /** Stored frames after the last key frame (id-0 frames received live): a gap replay repeats them. */
  private readonly trailing: string[];
  /** Whether a stored frame after our last key frame is another task's (see `trailingProof`). */
  private readonly trailingOtherTask: boolean;
  private state: Aligning | Live | Stopped;
  private oneTaskMemo: boolean | undefined;
  /** The previous connection's skip, shown again by this replay: the capsule wrote it so. */
  private readonly acceptsSkip = (f: AlignFrame): boolean => {
    const skip = this.input.acceptSkip;
    return skip != null && frameKey(skip) === frameKey(f);
  };

  constructor(private readonly input: AlignerInput) {
    const tail = input.hasHistory ? input.storedTail : [];
    this.keys = [];
    let lastKey = -1;
    tail.forEach((f, i) => {
      if (isKey(f)) {
        this.keys.push(frameKey(f));
        lastKey = i;
      }
    });
    const trailing = tail.slice(lastKey + 1);
    this.trailing = trailing.map(frameKey);
    const lastTask = lastKey >= 0 ? taskOf(tail[lastKey]!) : null;
    this.trailingOtherTask = trailing.some((f) => taskOf(f) !== lastTask);
    this.state = {
      phase: 'aligning',
      held: [],
      replay: [],
      alive: this.keys.map((_, p) => p),
      keyCount: 0,
      received: 0,
      gap: null,
      end: 'open',
      patience: 'waiting',
      overlap: null,
    };
  }

  /** The `gap` frame that opened the replay (only before any other frame). */
  gap(gap: { firstAvailableId: string }): void {
    if (this.state.phase === 'aligning' && this.state.received === 0) this.state.gap = gap;
  }

  /** Every frame after the ack (and the leading gap), in order. */
  push(frame: AlignFrame): void {
    const a = this.state;
    if (a.phase !== 'aligning') return this.afterOverlap(frame);
    a.received++;
    a.held.push(frame);
    if (isKey(frame)) {
      if (a.end === 'open') a.replay.push(frame);
      const key = frameKey(frame);
      const n = this.keys.length;
      const j = a.keyCount++;
      a.alive = a.alive.filter((p) => n - p <= j || this.keys[p + j] === key);
    } else if (a.gap !== null && frame.upstreamId !== null) {
      if (a.end === 'open') a.replay.push(frame); // a gap replay holds the id-0 frames too
    } else {
      a.end = 'proven'; // never in a replay: the replay is over and this frame is live
    }
    this.advance();
  }

  /** A comment (heartbeat): never inside a replay, so the replay is over. */
  comment(): void {
    if (this.state.phase !== 'aligning' || this.state.end === 'proven') return;
    this.state.end = 'proven';
    this.advance();
  }

  /** Timing says the replay burst is probably over: judge labels now (never duplicates vs new). */
  hint(): void {
    if (this.state.phase !== 'aligning' || this.state.patience !== 'waiting') return;
    this.state.patience = 'hinted';
    this.advance();
  }

  /**
   * The caller's window for proving the replay's end is over (a stall mid-replay is not its end):
   * what only that proof could clear is flagged now, and held frames are released after the fact.
   */
  expire(): void {
    if (this.state.phase !== 'aligning' || this.state.patience === 'expired') return;
    this.state.patience = 'expired';
    this.advance();
  }

  /** The whole replay has been pushed (a batch caller): everything is decided now. */
  end(): void {
    if (this.state.phase !== 'aligning') return;
    this.state.end = 'proven';
    this.advance();
  }

  /**
   * The connection ended. Frames whose fate is decided are released (labelled with what arrived, an
   * unproven continuity flagged); undecided ones are dropped: the next connection replays them.
   */
  close(): void {
    if (this.state.phase !== 'aligning') return;
    this.state.patience = 'expired';
    this.advance();
    if (this.state.phase === 'aligning') this.state.held = [];
  }

  /** Frames held back (tests, logs). */
  get pending(): number {
    return this.state.phase === 'aligning' ? this.state.held.length : 0;
  }

  private advance(): void {
    const a = this.state;
    if (a.phase !== 'aligning') return;
    const n = this.keys.length;
    if (a.overlap === null) {
      if (a.end === 'proven') a.alive = a.alive.filter((p) => n - p <= a.keyCount);
      const best = a.alive[0];
      const k = best === undefined ? 0 : n - best;
      if (k > a.keyCount) return; // a longer overlap may still claim the held frames
      a.overlap = { k, ambiguous: a.alive.length > 1 }; // shorter overlaps, all fully matched
    }
    const { k, ambiguous } = a.overlap;
    if (a.received === 0 && a.end === 'open' && a.patience === 'waiting') return; // a leading gap may still come
    const needsLength =
      this.input.hasHistory &&
      a.gap === null &&
      ((k === 0 && a.replay.length > 0) || (ambiguous && k === n) || (k > 0 && this.oneTask(k)));
    // A replay already too long for a buffer that never evicted has told its length: no need to wait.
    const told = !replayIsWholeSession(a.replay, false, this.input.bufferSize);
    if (needsLength && a.end === 'open' && a.patience === 'waiting' && !told) return;
    if (this.awaitsProof(a, k, ambiguous)) return;
    const byTrailing = this.trailingProof(a, k);
    if (byTrailing === null) return;
    this.label(a, k, ambiguous, byTrailing);
    this.state = { phase: 'live', repeats: k === 0 ? null : 0, firstMayStartInside: k === 0 };
    let skip = k;
    // On first contact the cold-attach fact already says the attempts' starts are unknown.
    const coveredByLabel = !this.input.hasHistory && !this.provedFresh(a);
    for (const f of a.held) {
      if (skip > 0) {
        if (isKey(f)) skip--;
        continue;
      }
      this.afterOverlap(f, coveredByLabel);
    }
  }

  /**
   * Whether the label hangs on the buffer never having evicted, which only the replay's proven end
   * can show and nothing has disproven yet: then the frames wait (see the header).
   */
  private awaitsProof(a: Aligning, k: number, ambiguous: boolean): boolean {
    if (a.end === 'proven' || !this.input.hasHistory || a.gap !== null) return false;
    if (!replayIsWholeSession(a.replay, false, this.input.bufferSize)) return false; // evicted: flag now
    const n = this.keys.length;
    const expired = a.patience === 'expired';
    // Nothing replayable stored: whatever comes first may be a replay held up, so even past the
    // window nothing is decided before a frame arrives (nothing is held meanwhile).
    if (k === 0) return n === 0 && (a.replay.length === 0 || !expired);
    // An overlap that starts after our first stored key frame proves the buffer evicted: flag now.
    return !expired && k === n && (ambiguous || this.oneTask(k));
  }

  /**
   * A `gap` replay holds id-0 frames too, so it repeats the ones we stored after our last key frame
   * (received live): when one of them is another task's and they follow the overlap here, the
   * overlap spans two tasks after all, which no reopened attempt can repeat. True: proven; false:
   * not (or not applicable); null: the frames after the overlap have not all arrived yet.
   */
  private trailingProof(a: Aligning, k: number): boolean | null {
    if (a.gap === null || k === 0 || !this.trailingOtherTask || !this.oneTask(k)) return false;
    let skip = k;
    let at = 0;
    for (const f of a.held) {
      if (skip > 0) {
        if (isKey(f)) skip--;
        continue;
      }
      if (frameKey(f) !== this.trailing[at]) return false;
      if (++at === this.trailing.length) return true;
    }
    return a.end === 'proven' || a.patience === 'expired' ? false : null;
  }

  /** The buffer provably never evicted: the replay's end is proven and it is short enough. */
  private provenWhole(a: Aligning): boolean {
    return (
      a.end === 'proven' && a.gap === null && replayIsWholeSession(a.replay, false, this.input.bufferSize)
    );
  }

  private label(a: Aligning, k: number, ambiguous: boolean, spansTasks: boolean): void {
    const { gap, replay } = a;
    const n = this.keys.length;
    const missing = (reason: MissingReason): void =>
      this.input.emit({
        kind: 'missing',
        fact: gap ? { reason, firstAvailableId: gap.firstAvailableId } : { reason },
      });
    if (!this.input.hasHistory) return this.provedFresh(a) ? undefined : missing('cold-attach');
    const whole = replayIsWholeSession(replay, gap !== null, this.input.bufferSize);
    // A new capsule session. Within one session the buffer never loses its newest frames, so an
    // empty replay after we stored replayable frames means the buffer was emptied (restart), and a
    // replay that is provably the whole session yet does not continue ours is another session's.
    if (gap === null && n > 0 && (replay.length === 0 || (k === 0 && whole))) {
      this.input.emit({ kind: 'missing', fact: { reason: 'capsule-restarted' } });
      this.input.emit({ kind: 'new-session' });
      this.input.idZero.reset();
      return;
    }
    // From here a fact is withheld only where continuity is proven: by content (an overlap that spans
    // two tasks), or by the buffer provably never having evicted (`provenWhole`), never by timing.
    const proven = this.provenWhole(a);
    // A gap says the buffer's start is gone even before (or without) any replayed frame in hand.
    if (k === 0 && (replay.length > 0 || gap)) {
      if (gap) missing('gap');
      else if (n > 0 || !proven) missing('no-overlap');
      // else: nothing replayable stored and the replay is the whole session: nothing skipped but id-0.
    } else if (ambiguous && !(proven && k === n)) {
      // The stored tail is periodic where it meets the replay (a reopened attempt repeating the
      // previous one), so the replay could start at more than one point. We took the longest overlap
      // (never a duplicate); a shorter one would mean frames we now skip were new: say so.
      missing('no-overlap');
    } else if (k > 0 && !(proven && k === n) && !spansTasks && this.oneTask(k)) {
      // The overlap lies inside one task, and the buffer evicted (stored key frames before the overlap
      // are gone from it) or may have. A reopened attempt repeats its task byte for byte, so a buffer
      // that now starts inside the NEXT attempt matches our tail just as well: everything between (the
      // rest of this attempt, the next one's start, whole tasks) would be gone without a trace. Content
      // cannot tell the two apart; an overlap spanning two tasks can.
      missing('no-overlap');
    }
  }

  /** First contact with a capsule that had written nothing, and a replay that agrees. */
  private provedFresh(a: Aligning): boolean {
    return this.input.freshCapsule === true && a.replay.length === 0 && a.gap === null;
  }

  /** Whether the last k stored key frames all belong to one task (then the label needs the length). */
  private oneTask(k: number): boolean {
    this.oneTaskMemo ??= this.computeOneTask(k);
    return this.oneTaskMemo;
  }

  private computeOneTask(k: number): boolean {
    const { storedTail } = this.input;
    let task: string | null | undefined;
    let seen = 0;
    for (let i = storedTail.length - 1; i >= 0 && seen < k; i--) {
      const f = storedTail[i]!;
      if (!isKey(f)) continue;
      seen++;
      const t = taskOf(f);
      if (task === undefined) task = t;
      else if (t !== task) return false;
    }
    return true;
  }

  /**
   * Right after the overlap, stored frames after our last key frame can only be frames the
   * alignment skips (id 0, received live); a `gap` replay holds them again here, so those are
   * dropped in order until the next key frame, and any other is new to us and kept.
   */
  private afterOverlap(f: AlignFrame, coveredByLabel = false): void {
    const live = this.state;
    if (live.phase !== 'live') return;
    if (live.repeats !== null) {
      if (isKey(f)) live.repeats = null;
      else if (live.repeats < this.trailing.length && frameKey(f) === this.trailing[live.repeats]) {
        live.repeats++;
        return;
      }
    }
    this.release(live, f, coveredByLabel);
  }

  private release(live: Live, f: AlignFrame, coveredByLabel: boolean): void {
    const watch = this.input.watchDrops !== false && !live.firstMayStartInside;
    live.firstMayStartInside = false;
    const seen = this.input.idZero.admit(f, watch, this.acceptsSkip);
    if (seen === 'skips') {
      // Frames before this one were dropped from the connection, not from the buffer: replay them
      // in their place rather than record this one after a hole (the next connection takes this
      // frame as is if its replay shows the same skip).
      this.state = { phase: 'stopped' };
      this.input.emit({ kind: 'reconnect', reason: 'frames skipped', frame: f });
      return;
    }
    // A dropped run that ends at a task's first status took the previous task's end with it; the
    // replay could not put them before this frame, which is already here: say so in place.
    if (seen === 'opens-over-unended') this.input.emit({ kind: 'missing', fact: { reason: 'lagged' } });
    else if (seen === 'reveals-id-zero' && !coveredByLabel) {
      this.input.emit({ kind: 'missing', fact: { reason: 'id-zero-unreplayable', count: 1 } });
    }
    this.input.emit({ kind: 'frame', frame: f });
  }
}
