/**
 * Replay reconciliation: a pure function that decides which replayed frames are new and which facts
 * ("frames possibly missing") to record. Reading the socket and writing the log are left to callers.
 *
 * Why this is a sequence alignment (murmur-upstream.md, last section): ids are labels, not a sequence
 * (spec "Event ids"), and a reopened attempt repeats frames byte for byte, so neither id nor content
 * identifies a frame. What holds is that the replay is the session's most recent history in write
 * order, filtered by the replay's id predicate (spec "Replay"). So the stored tail, filtered by the same
 * predicate, must END with what the replay STARTS with: find that overlap, append what follows it.
 *
 * Why we always send `Last-Event-ID: 0`: a replay from N writes only frames with id > N, so 0 is the
 * widest replay the protocol offers without a gap. Id-0 frames (each task attempt's first `working`
 * status) are never replayed from 0 unless the `gap` branch fires (spec "Replay").
 */
import type { MissingReason } from '../log/record.js';

/** A frame as reconciliation sees it: compared on all three fields, byte for byte. */
export interface AlignFrame {
  event: string;
  upstreamId: string | null;
  data: string;
}

export interface ReconcileInput {
  /** The last ≤ bufferSize id-bearing frames we stored for the current capsule session, oldest first. */
  storedTail: readonly AlignFrame[];
  /** Whether the log holds anything at all for this capsule (false: first contact). */
  hasHistory: boolean;
  /** The `Last-Event-ID` sent (always '0', see the header). */
  lastEventId: string;
  /** The `gap` frame that opened the replay, if any. */
  gap: { firstAvailableId: string } | null;
  /** The replayed frames, in the order received. */
  replay: readonly AlignFrame[];
  /** The capsule's replay buffer size (spec: 512). */
  bufferSize: number;
}

export interface MissingFact {
  reason: MissingReason;
  firstAvailableId?: string;
  /** How many frames are known to be missing, when known (id-0 frames). */
  count?: number;
}

export interface ReconcileResult {
  /** Replay frames not yet stored, in order. */
  append: AlignFrame[];
  /** Facts to record before `append`, in order. */
  missing: MissingFact[];
  /** True when the replay shows a new capsule session: the caller records the boundary, resets its tail. */
  newSession: boolean;
  /** How many replay frames matched the stored tail (and were dropped as already stored). */
  overlap: number;
}

/** Ids above this are not from a task's counter (chunk launch value, input-wait, queued-cancel). */
const TASK_COUNTER_LIMIT = 2305843009213693951n;

const idValue = (id: string | null): bigint | null => {
  if (id === null || !/^\d+$/.test(id)) return null;
  return BigInt(id);
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

const frameKey = (f: AlignFrame): string => `${f.event}\u0000${f.upstreamId ?? ''}\u0000${f.data}`;

/**
 * Every k ≥ 1 such that the last k of `stored` equal the first k of `replay`, longest first.
 * KMP prefix function over `replay # stored`: the border chain at the end lists exactly those k.
 */
export const overlapLengths = (stored: readonly AlignFrame[], replay: readonly AlignFrame[]): number[] => {
  const symbols = new Map<string, number>();
  const sym = (f: AlignFrame): number => {
    const key = frameKey(f);
    let s = symbols.get(key);
    if (s === undefined) {
      s = symbols.size;
      symbols.set(key, s);
    }
    return s;
  };
  const seq: number[] = [...replay.map(sym), -1, ...stored.map(sym)];
  const pi = new Array<number>(seq.length).fill(0);
  for (let i = 1; i < seq.length; i++) {
    let k = pi[i - 1]!;
    while (k > 0 && seq[i] !== seq[k]) k = pi[k - 1]!;
    if (seq[i] === seq[k]) k++;
    pi[i] = k;
  }
  const out: number[] = [];
  for (let k = pi[seq.length - 1] ?? 0; k > 0; k = pi[k - 1]!) out.push(k);
  return out;
};

const taskOf = (f: AlignFrame): string | null => {
  try {
    const parsed = JSON.parse(f.data) as { id?: unknown };
    return typeof parsed.id === 'string' ? parsed.id : null;
  } catch {
    return null;
  }
};

/**
 * Count id-0 frames the appended part implies but nobody holds. A frame with id `1` is the second
 * frame of a task attempt (the task counter starts at 0 per attempt, spec "Event ids"); its attempt's
 * id-0 `working` status is held only if the task's latest task-counter frame before it is id 0.
 * Otherwise the attempt started while we were away and a replay from 0 cannot contain its id-0 frame.
 */
export const countUnreplayedIdZero = (
  stored: readonly AlignFrame[],
  appended: readonly AlignFrame[],
): number => {
  const lastTaskCounterId = new Map<string, bigint>();
  const note = (f: AlignFrame): string | null => {
    const id = idValue(f.upstreamId);
    if (id === null || id >= TASK_COUNTER_LIMIT) return null;
    const task = taskOf(f);
    if (task === null) return null;
    const before = lastTaskCounterId.get(task);
    lastTaskCounterId.set(task, id);
    return id === 1n && before !== 0n ? task : null;
  };
  for (const f of stored) note(f);
  let missing = 0;
  for (const f of appended) if (note(f) !== null) missing++;
  return missing;
};

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

/** Reconcile one (re)connection's replay against what we stored. Pure; see the module header. */
export const reconcile = (input: ReconcileInput): ReconcileResult => {
  const { replay, gap, bufferSize } = input;
  const keep = replayPredicate(input.lastEventId, gap !== null);
  const gapFact = (reason: MissingReason): MissingFact =>
    gap ? { reason, firstAvailableId: gap.firstAvailableId } : { reason };

  // First contact: nothing to align with. Frames before the buffer and id-0 frames are unknown.
  if (!input.hasHistory) {
    return { append: [...replay], missing: [gapFact('cold-attach')], newSession: false, overlap: 0 };
  }

  const filtered = input.storedTail.filter(keep);
  const ks = overlapLengths(filtered, replay);
  const k = ks[0] ?? 0;
  const whole = replayIsWholeSession(replay, gap !== null, bufferSize);

  // A new capsule session. Within one session the buffer never loses its newest frames, so:
  //  - an empty replay after we stored replayable frames means the buffer was emptied (restart);
  //    an empty replay with nothing replayable stored (only id-0 frames, or none) is read as the
  //    same idle session: nothing to append, nothing provably lost;
  //  - a replay that is provably the whole session yet does not continue what we stored is another
  //    session's history.
  const restarted = gap === null && filtered.length > 0 && (replay.length === 0 || (k === 0 && whole));
  if (restarted) {
    const missing: MissingFact[] = [{ reason: 'capsule-restarted' }];
    const lostZero = countUnreplayedIdZero([], replay);
    if (lostZero > 0) missing.push({ reason: 'id-zero-unreplayable', count: lostZero });
    return { append: [...replay], missing, newSession: true, overlap: 0 };
  }

  const append = replay.slice(k);
  const missing: MissingFact[] = [];
  if (k === 0 && replay.length > 0) {
    if (gap) missing.push(gapFact('gap'));
    else if (filtered.length > 0 || !whole) missing.push({ reason: 'no-overlap' });
    // else: nothing replayable stored and the replay is the whole session: nothing skipped but id-0.
  } else if (ks.length > 1 && !(whole && k === filtered.length)) {
    // The stored tail is periodic where it meets the replay (e.g. a reopened attempt repeating the
    // previous one), so the replay could start at more than one point. We take the longest overlap
    // (never a duplicate); a shorter one would mean frames we now skip were new: say so.
    missing.push({ reason: 'no-overlap' });
  }
  const lostZero = countUnreplayedIdZero(input.storedTail, append);
  if (lostZero > 0) missing.push({ reason: 'id-zero-unreplayable', count: lostZero });
  return { append, missing, newSession: false, overlap: k };
};
