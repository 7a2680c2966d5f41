/**
 * Ids from release 0.4 on (docs/release-lines.md): one sequence per session from 1 on
 * every id-bearing frame, so the spec's per-task counters no longer matter. Frames are still built by
 * the same code with the spec's ids; the session re-stamps each one with the next sequence id as it
 * writes it, which keeps the per-line difference in one place.
 */
import { encodeFrame, gapFrame, type Frame } from './frames.js';
import { Counter } from './ids.js';

/** The same frame with another id line (or none). */
export const withId = (frame: Frame, id: bigint | null): Frame =>
  encodeFrame(frame.event, frame.data, id, frame.final);

/** `lagged`: no id; how many live frames this connection lost since it last caught up. */
export const laggedFrame = (missed: number): Frame => encodeFrame('lagged', `{"missed":${missed}}`);

export class SequenceIds {
  private readonly counter = new Counter(1n);

  /** The id the next frame will get (every id below it was issued by this session). */
  get nextId(): bigint {
    return this.counter.value;
  }

  next(): bigint {
    return this.counter.next();
  }
}

/**
 * Replay from `Last-Event-ID: N` on a sequence line: the buffered frames with id > N. A `gap` (then
 * the whole buffer) only when frames after N were evicted (the oldest buffered id is past N + 1) or
 * N was never issued by this session (N >= the next id: a cursor from another session).
 */
export const sequenceReplay = (buffered: Frame[], from: bigint, nextId: bigint): Frame[] => {
  const oldestId = buffered[0]?.id ?? nextId;
  if (from >= nextId || oldestId > from + 1n) return [gapFrame(oldestId), ...buffered];
  return buffered.filter((f) => (f.id ?? 0n) > from);
};
