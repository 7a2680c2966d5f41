/**
 * Group commit for busy capsules: when a capsule's frames arrive faster than `aboveRate` per second,
 * its next batch waits until `ms` after the previous one was sent, so one store call carries that
 * many milliseconds of frames (Kafka's `linger.ms`). A store call has a fixed cost far above its
 * per-frame cost: on Redis about 150 µs of gateway CPU and 60 µs of `redis-server` per EVALSHA
 * against 6 µs per frame, so a capsule streaming 4,000 frames/s in batches of 5 spent a quarter of
 * a core on calls alone. Below the rate (every ordinary capsule) a frame goes out at once: only a
 * capsule already paying that cost pays the wait.
 */

/** The busy test looks at the entries sent over windows of this length. */
const RATE_WINDOW_MS = 100;

export interface LingerBounds {
  /** How long after a busy capsule's previous batch its next one may wait; 0 = never wait. */
  ms: number;
  /** Entries per second above which a capsule is busy. */
  aboveRate: number;
}

/** Per-lane state of the busy test. */
export interface LingerState {
  /** When the lane's last batch was taken (performance.now()). */
  sentAt: number;
  /** The current rate window: since when, and the entries sent in it. */
  windowAt: number;
  windowSent: number;
  busy: boolean;
}

export const newLingerState = (): LingerState => ({
  sentAt: 0,
  windowAt: 0,
  windowSent: 0,
  busy: false,
});

/**
 * How long the lane's next batch should wait, 0 = send now. A lane with a full batch waiting never
 * waits; a lane idle for a window is not busy, so the first frame after a pause goes at once.
 */
export const lingerFor = (
  state: LingerState,
  queued: number,
  bounds: LingerBounds,
  maxBatch: number,
  now: number,
): number => {
  if (bounds.ms <= 0) return 0;
  const elapsed = now - state.windowAt;
  if (elapsed >= RATE_WINDOW_MS) {
    state.busy = state.windowSent * 1000 >= bounds.aboveRate * elapsed;
    state.windowAt = now;
    state.windowSent = 0;
  }
  if (!state.busy || queued >= maxBatch) return 0;
  return Math.max(0, state.sentAt + bounds.ms - now);
};

/** Count a batch taken now. */
export const noteSent = (state: LingerState, entries: number, now: number): void => {
  state.sentAt = now;
  state.windowSent += entries;
};
