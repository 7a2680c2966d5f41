/**
 * Replay reconciliation as one call, for tests: the whole replay in, which frames are new and which
 * facts ("frames possibly missing") to record out. The ingestor aligns frame by frame as they arrive
 * (src/upstream/replay-alignment.ts); this batch form runs the same aligner over a replay known to be
 * complete, so tables of stored tail × replay can check it without a connection.
 *
 * Why this is a sequence alignment: ids are labels, not a sequence
 * (spec "Event ids"), and a reopened attempt repeats frames byte for byte, so neither id nor content
 * identifies a frame. What holds is that the replay is the session's most recent history in write
 * order, filtered by the replay's id predicate (spec "Replay"). So the stored tail, filtered by the same
 * predicate, must END with what the replay STARTS with: find that overlap, append what follows it.
 *
 * Why we always send `Last-Event-ID: 0`: a replay from N writes only frames with id > N, so 0 is the
 * widest replay the protocol offers without a gap. Id-0 frames (each task attempt's first `working`
 * status) are never replayed from 0 unless the `gap` branch fires (spec "Replay").
 */
import { IdZeroTracker } from '../../src/upstream/id-zero.js';
import {
  frameKey,
  ReplayAligner,
  type AlignFrame,
  type MissingFact,
} from '../../src/upstream/replay-alignment.js';

export { IdZeroTracker } from '../../src/upstream/id-zero.js';
export {
  replayIsWholeSession,
  replayPredicate,
  type AlignFrame,
  type MissingFact,
} from '../../src/upstream/replay-alignment.js';

export interface ReconcileInput {
  /** The last ≤ bufferSize id-bearing frames we stored for the current capsule session, oldest first. */
  storedTail: readonly AlignFrame[];
  /** Whether the log holds anything at all for this capsule (false: first contact). */
  hasHistory: boolean;
  /** The `Last-Event-ID` sent (always '0', see the header). */
  lastEventId: string;
  /** The `gap` frame that opened the replay, if any. */
  gap: { firstAvailableId: string } | null;
  /** The replayed frames, in the order received: the whole replay. */
  replay: readonly AlignFrame[];
  /** The capsule's replay buffer size (spec: 512). */
  bufferSize: number;
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

/** Reconcile one (re)connection's complete replay against what we stored. Pure; see the module header. */
export const reconcile = (input: ReconcileInput): ReconcileResult => {
  const result: ReconcileResult = { append: [], missing: [], missingAt: [], newSession: false, overlap: 0 };
  const idZero = new IdZeroTracker(Number.MAX_SAFE_INTEGER);
  if (input.hasHistory) for (const f of input.storedTail) idZero.note(f);
  const aligner = new ReplayAligner({
    storedTail: input.storedTail,
    hasHistory: input.hasHistory,
    bufferSize: input.bufferSize,
    idZero,
    watchDrops: false,
    emit: (out) => {
      if (out.kind === 'frame') result.append.push(out.frame);
      else if (out.kind === 'new-session') result.newSession = true;
      else if (out.kind === 'reconnect')
        return; // never asked for: watchDrops is off
      else if (out.fact.reason === 'id-zero-unreplayable')
        result.missingAt.push({ index: result.append.length, fact: out.fact });
      else result.missing.push(out.fact);
    },
  });
  if (input.gap) aligner.gap(input.gap);
  for (const f of input.replay) aligner.push(f);
  aligner.end();
  result.overlap = input.replay.length - result.append.length;
  return result;
};

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

/** How many id-0 frames the appended part implies but nobody holds. */
export const countUnreplayedIdZero = (
  stored: readonly AlignFrame[],
  appended: readonly AlignFrame[],
): number => unreplayedIdZeroAt(stored, appended).length;
