/**
 * What the log already holds of the capsule's current session, as replay alignment needs it: the
 * id-bearing frames the writer accepted (not merely received: a refused frame must be replayed),
 * whether the log holds anything at all, and each task's latest task-counter id. Seeded from the
 * store at start and after a store reset, then extended by every accepted frame.
 */
import type { LogRecord, ReleaseLine } from '../log/record.js';
import { IdZeroTracker } from './id-zero.js';
import type { AlignFrame } from './replay-alignment.js';

/** Frames that never enter a replay buffer are not part of the aligned tail (spec "Replay"). */
export const isBufferedFrame = (f: { upstreamId: string | null }): boolean => f.upstreamId !== null;

export class AlignedTail {
  /** Id-bearing frames the writer accepted for the current capsule session, oldest first. */
  frames: AlignFrame[] = [];
  hasHistory = false;
  /**
   * The release line and session the stored stretch was read with: the last `upstream-connected` fact
   * (null: none in what was read). A 0.4+ cursor is only meaningful within its session.
   */
  release: ReleaseLine | null = null;
  session: string | null = null;
  /** Each task's latest task-counter id, to spot attempts whose id-0 frame never reached us. */
  readonly idZero = new IdZeroTracker();

  /** `bufferSize`: the capsule's replay buffer; twice that many frames are kept at most. */
  constructor(private readonly bufferSize: number) {}

  /** Start over from stored records: the frames after the last `capsule-session-started` fact. */
  seed(records: LogRecord[]): void {
    this.hasHistory = records.length > 0;
    this.frames = [];
    this.idZero.reset();
    this.release = null;
    this.session = null;
    let from = 0;
    records.forEach((r, i) => {
      if (r.kind !== 'fact') return;
      if (r.fact === 'capsule-session-started') from = i + 1;
      if (r.fact === 'upstream-connected') {
        this.release = r.release ?? 'spec';
        this.session = r.sessionId ?? null;
      }
    });
    for (const r of records.slice(from)) {
      if (r.kind === 'frame' && isBufferedFrame(r)) {
        this.remember({ event: r.event, upstreamId: r.upstreamId, data: r.data });
        this.idZero.note(r);
      }
    }
  }

  remember(f: AlignFrame): void {
    this.frames.push(f);
    // Trim in steps, not per frame: keeps appends O(1) amortised at high rates.
    if (this.frames.length > this.bufferSize * 2) this.frames = this.frames.slice(-this.bufferSize);
  }
}
