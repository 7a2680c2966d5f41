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
  /**
   * Facts to record just before `append[index]` (index ascending): an id-0 frame the replay cannot
   * hold, placed where it was written, right before the frame that reveals it.
   */
  missingAt: { index: number; fact: MissingFact }[];
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

const TASK_PREFIX = /^\{"id":"([^"\\]*)"/;

const taskOf = (f: AlignFrame): string | null => {
  const fast = TASK_PREFIX.exec(f.data); // the capsule writes `id` first (spec examples)
  if (fast) return fast[1]!;
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
 * id-0 `working` status is held only if the task's latest task-counter frame before it is id 0 (or 1:
 * ids may repeat); a task-counter frame right after the task's final status opens a reopened attempt.
 * Otherwise the attempt started while we were away and a replay from 0 cannot contain its id-0 frame.
 */
export const countUnreplayedIdZero = (
  stored: readonly AlignFrame[],
  appended: readonly AlignFrame[],
): number => unreplayedIdZeroAt(stored, appended).length;

/** Indexes into `appended` of the frames that reveal an unreplayed id-0 frame just before them. */
export const unreplayedIdZeroAt = (
  stored: readonly AlignFrame[],
  appended: readonly AlignFrame[],
): number[] => {
  const tracker = new IdZeroTracker(Number.MAX_SAFE_INTEGER);
  for (const f of stored) tracker.note(f);
  const at: number[] = [];
  appended.forEach((f, i) => {
    if (tracker.note(f)) at.push(i);
  });
  return at;
};

/**
 * The same rule, kept up to date frame by frame, for frames that arrive live after a reconnect: an
 * attempt that began while we were away shows itself only when its id-1 frame arrives.
 */
export class IdZeroTracker {
  /** Per task: the latest task-counter id, and whether that frame was a final status. */
  private readonly last = new Map<string, { id: bigint; final: boolean }>();

  constructor(private readonly maxTasks = 4096) {}

  /** Record a frame; true when it reveals an id-0 frame we never received. */
  note(f: AlignFrame): boolean {
    const id = idValue(f.upstreamId);
    if (id === null || id >= TASK_COUNTER_LIMIT) return false;
    const task = taskOf(f);
    if (task === null) return false;
    const before = this.last.get(task);
    this.last.delete(task); // re-insert: the map iterates oldest task first
    this.last.set(task, { id, final: f.event === 'status' && f.data.includes('"final":true') });
    if (this.last.size > this.maxTasks) this.last.delete(this.last.keys().next().value!);
    if (id === 0n) return false;
    // A task-counter frame after the task's final status starts a reopened attempt (spec "status":
    // ids start again at 0); ids may repeat within an attempt (a whole-reply `text` and the status
    // after it can share one), so otherwise only a fall back to 1, or a task never seen, marks one.
    if (before === undefined) return id === 1n;
    return before.final || (id === 1n && before.id > 1n);
  }

  reset(): void {
    this.last.clear();
  }
}

const idZeroFacts = (
  stored: readonly AlignFrame[],
  appended: readonly AlignFrame[],
): { index: number; fact: MissingFact }[] =>
  unreplayedIdZeroAt(stored, appended).map((index) => ({
    index,
    fact: { reason: 'id-zero-unreplayable', count: 1 },
  }));

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

/**
 * The replay after the aligned part, from `from`. Stored frames after our last aligned one can only be
 * frames the alignment skips (id ≤ N, received live); a `gap` replay holds them again right here, so
 * those are dropped in order, and any other id ≤ N frame is new to us and kept.
 */
const afterOverlap = (
  stored: readonly AlignFrame[],
  replay: readonly AlignFrame[],
  from: number,
  keep: (f: AlignFrame) => boolean,
): AlignFrame[] => {
  let lastKey = stored.length - 1;
  while (lastKey >= 0 && !keep(stored[lastKey]!)) lastKey--;
  const trailing = stored.slice(lastKey + 1).map(frameKey);
  const out: AlignFrame[] = [];
  let t = 0;
  let pastKey = false; // the trailing frames come before the replay's next key frame
  for (let i = from; i < replay.length; i++) {
    const f = replay[i]!;
    pastKey ||= keep(f);
    if (!pastKey && t < trailing.length && frameKey(f) === trailing[t]) {
      t++;
      continue;
    }
    out.push(f);
  }
  return out;
};

/** Reconcile one (re)connection's replay against what we stored. Pure; see the module header. */
export const reconcile = (input: ReconcileInput): ReconcileResult => {
  const { replay, gap, bufferSize } = input;
  const keep = replayPredicate(input.lastEventId, false);
  const gapFact = (reason: MissingReason): MissingFact =>
    gap ? { reason, firstAvailableId: gap.firstAvailableId } : { reason };

  // First contact: nothing to align with. Frames before the buffer and id-0 frames are unknown.
  if (!input.hasHistory) {
    return {
      append: [...replay],
      missing: [gapFact('cold-attach')],
      missingAt: [],
      newSession: false,
      overlap: 0,
    };
  }

  // Align on the frames every replay from N holds (id > N). A `gap` replay also holds the id ≤ N
  // frames, some of which we never had (an earlier replay could not hold them), so they cannot take
  // part in an exact alignment; they are placed after it (see `afterOverlap`).
  const filtered = input.storedTail.filter(keep);
  const keyIndex: number[] = [];
  replay.forEach((f, i) => {
    if (keep(f)) keyIndex.push(i);
  });
  const replayKeys = keyIndex.map((i) => replay[i]!);
  const ks = overlapLengths(filtered, replayKeys);
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
    return {
      append: [...replay],
      missing: [{ reason: 'capsule-restarted' }],
      missingAt: idZeroFacts([], replay),
      newSession: true,
      overlap: 0,
    };
  }

  const append = k === 0 ? [...replay] : afterOverlap(input.storedTail, replay, keyIndex[k - 1]! + 1, keep);
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
  return {
    append,
    missing,
    missingAt: idZeroFacts(input.storedTail, append),
    newSession: false,
    overlap: replay.length - append.length,
  };
};
