/**
 * Resuming a 0.4-or-later capsule exactly by id. From 0.4 a session's ids are one sequence from 1,
 * unique and ascending on a connection (docs/release-lines.md), so the cursor is (session, last id) and
 * a replay continues it. What ids cannot say is WHICH session: a new session starts again at 1, and
 * a cursor below its next id gets no `gap`, so its first frames would be skipped without a trace.
 *
 * So a connection asks for one frame it already holds: `Last-Event-ID: L-1` where L is the last
 * stored id. The first frame of the replay must be frame L, byte for byte; anything else (another
 * frame, a lower id, a higher id without a gap) is another session, and the next connection replays
 * it from 0 as a new stretch of the log. A card whose session id differs from the stored one skips the
 * check and goes straight to 0.
 *
 * After the check, a frame at or below the cursor is a duplicate, the next id is new, and a hole in
 * the ids or a `lagged` frame (the capsule dropped frames from this connection) means "reconnect now":
 * the replay still holds what was lost unless a `gap` says it does not, which alone becomes a
 * frames-possibly-missing fact, with the count the ids prove. `lagged` never enters the log.
 */
import type { AlignFrame, AlignOutput, MissingFact, ReconnectOutput } from './replay-alignment.js';

export type IdResumeOutput = AlignOutput | ReconnectOutput;

export interface IdResumeInput {
  /** The last stored id of the session the log holds (null: nothing resumable stored). */
  lastId: bigint | null;
  /** The stored frame with that id, to check the replay continues it. */
  lastFrame: AlignFrame | null;
  /** Whether the log holds anything at all for this capsule (false: first contact). */
  hasHistory: boolean;
  /** The stored session is known to differ from the capsule's (the card says), or a check failed. */
  newSession: boolean;
  /** Why the previous connection ended, when it was lagging (labels a `gap`). */
  lagged: boolean;
  emit(out: IdResumeOutput): void;
}

const numericId = (id: string | null): bigint | null =>
  id !== null && /^\d{1,20}$/.test(id) ? BigInt(id) : null;

/** The `Last-Event-ID` a connection sends for this input. */
export const resumeFrom = (input: Pick<IdResumeInput, 'lastId' | 'newSession'>): string =>
  input.newSession || input.lastId === null || input.lastId <= 1n ? '0' : (input.lastId - 1n).toString();

export class IdResume {
  /** The highest id released (or proven stored) on this connection. */
  private last: bigint;
  /** Until the first id-bearing frame (or gap) proved which session this is. */
  private checking: boolean;
  private done = false;

  constructor(private readonly input: IdResumeInput) {
    const fresh = input.newSession || input.lastId === null;
    this.last = fresh ? 0n : input.lastId!;
    this.checking = !fresh && input.lastId! >= 1n;
    if (fresh && input.hasHistory && input.newSession) {
      // The stored stretch belongs to a session that is gone: frames it wrote after our last are gone too.
      if (input.lastId !== null) input.emit({ kind: 'missing', fact: { reason: 'capsule-restarted' } });
      input.emit({ kind: 'new-session' });
    }
  }

  /** The `gap` that opened the replay: the buffer no longer holds what follows the cursor. */
  gap(gap: { firstAvailableId: string }): void {
    if (this.done) return;
    const first = numericId(gap.firstAvailableId);
    // Our session issued frame L, so a `gap` for cursor L-1 means frames past L-1 were evicted: the
    // oldest id the buffer holds is past L. One at or below L says the cursor was never issued here.
    if (this.checking && first !== null && first <= this.last) return this.reconnect('another session');
    const fact: MissingFact = {
      reason: !this.input.hasHistory ? 'cold-attach' : this.input.lagged ? 'lagged' : 'gap',
      firstAvailableId: gap.firstAvailableId,
    };
    if (first !== null && first > this.last + 1n) fact.count = Number(first - this.last - 1n);
    this.input.emit({ kind: 'missing', fact });
    // The session is taken to be the stored one (the card did not say otherwise): resume after the hole.
    this.checking = false;
    if (first !== null && first > this.last) this.last = first - 1n;
  }

  push(frame: AlignFrame): void {
    if (this.done) return;
    const id = numericId(frame.upstreamId);
    if (id === null) {
      if (frame.event === 'lagged' && frame.upstreamId === null) return this.reconnect('lagged');
      // Frames without ids (rejected, error) are live by nature: never replayed, never duplicates.
      this.input.emit({ kind: 'frame', frame });
      return;
    }
    if (this.checking) {
      this.checking = false;
      const stored = this.input.lastFrame;
      const same =
        id === this.last &&
        stored !== null &&
        stored.event === frame.event &&
        stored.data === frame.data &&
        stored.upstreamId === frame.upstreamId;
      if (!same) return this.reconnect('another session');
      return; // frame L itself: already stored
    }
    if (id <= this.last) return; // replayed again: already stored
    if (id !== this.last + 1n) return this.reconnect('id hole');
    this.last = id;
    this.input.emit({ kind: 'frame', frame });
  }

  /** Heartbeats, the quiet hint and the connection's end decide nothing here: ids do. */
  comment(): void {}
  hint(): void {}
  expire(): void {}
  close(): void {}

  private reconnect(reason: 'lagged' | 'id hole' | 'another session'): void {
    this.done = true;
    this.input.emit({ kind: 'reconnect', reason });
  }
}
