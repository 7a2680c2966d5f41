/**
 * The session's replay buffer (spec "Replay"): the most recent N id-bearing frames in write order,
 * and the replay rule by id comparison. Which frames enter it is the caller's decision.
 */
import { gapFrame, type Frame } from './frames.js';

export class ReplayBuffer {
  private frames: Frame[] = [];

  constructor(private readonly capacity: number) {}

  /** Append a frame with an id; a full buffer evicts its oldest frame. */
  push(frame: Frame): void {
    if (frame.id === null || this.capacity <= 0) return;
    this.frames.push(frame);
    if (this.frames.length > this.capacity) this.frames.shift();
  }

  get size(): number {
    return this.frames.length;
  }

  /** A copy of the buffer, oldest first. */
  snapshot(): Frame[] {
    return [...this.frames];
  }

  /**
   * Replay from id N: empty → nothing; oldest id > N + 1 → `gap` then the whole buffer; otherwise
   * every frame whose id > N in buffer order (so a replay from 0 skips every id-0 frame).
   */
  replay(from: bigint): Frame[] {
    const oldest = this.frames[0];
    if (oldest === undefined) return [];
    const oldestId = oldest.id ?? 0n;
    if (oldestId > from + 1n) return [gapFrame(oldestId), ...this.frames];
    return this.frames.filter((f) => (f.id ?? 0n) > from);
  }
}
