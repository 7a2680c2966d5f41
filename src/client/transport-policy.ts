/**
 * When `auto` leaves SSE for long-poll, how long a poll may hold, when to probe SSE again, and how
 * long to wait after errors. Pure bookkeeping over what the client observed; no I/O.
 */
import type { FollowTuning, Transport } from './types.js';

export const DEFAULT_TUNING: FollowTuning = {
  firstByteMs: 5_000,
  youngMs: 10_000,
  youngDeaths: 2,
  probeMs: 60_000,
  probeMaxMs: 600_000,
  pollHoldMs: 25_000,
  backoffMs: 250,
  backoffMaxMs: 30_000,
  pollLimit: 500,
};

/** How an SSE connection ended, as the policy needs it. */
export interface SseEnd {
  /** From request start to its end. */
  ageMs: number;
  /** From the last byte (or the start) to its end. */
  idleMs: number;
  /** No byte came within firstByteMs: something buffers the stream. */
  buffered: boolean;
}

/** Full jitter: uniformly in [0, min(max, base · 2^n)], so a restarted gateway meets no stampede. */
export const jitteredBackoff = (
  attempt: number,
  tuning: FollowTuning,
  retryAfterMs: number | null,
): number => {
  const ceiling = Math.min(tuning.backoffMaxMs, tuning.backoffMs * 2 ** Math.min(attempt, 20));
  const delay = Math.random() * ceiling;
  // Retry-After is the server's floor; jitter above it spreads clients that got the same answer.
  return retryAfterMs === null ? delay : retryAfterMs + Math.random() * Math.min(ceiling, 1_000);
};

export class TransportPolicy {
  transport: Transport;
  /** On long-poll because SSE did not survive (auto only). */
  fallback = false;
  private youngInRow = 0;
  /** The shortest lifetime or idle time after which a connection was cut, as observed. */
  private cutAfterMs: number | null = null;
  private probeDelayMs: number;
  private probeAt = Infinity;

  constructor(
    private readonly mode: 'auto' | Transport,
    private readonly tuning: FollowTuning,
  ) {
    this.transport = mode === 'long-poll' ? 'long-poll' : 'sse';
    this.probeDelayMs = tuning.probeMs;
  }

  /** An SSE connection ended without us closing it. Returns why it switched, or null. */
  sseEnded(end: SseEnd): string | null {
    // A cut after a stretch of silence says "idle limit"; a cut mid-stream says "lifetime limit".
    const cut = end.idleMs >= 500 ? end.idleMs : end.ageMs;
    if (!end.buffered) this.cutAfterMs = Math.min(this.cutAfterMs ?? Infinity, cut);
    const young = end.buffered || end.ageMs < this.tuning.youngMs;
    this.youngInRow = young ? this.youngInRow + 1 : 0;
    if (this.mode !== 'auto') return null;
    if (!end.buffered && this.youngInRow < this.tuning.youngDeaths) return null;
    const wasProbe = this.probeAt !== Infinity;
    if (wasProbe) this.probeDelayMs = Math.min(this.tuning.probeMaxMs, this.probeDelayMs * 2);
    this.toFallback();
    return end.buffered
      ? 'no byte of the SSE stream arrived in time (a buffering proxy?)'
      : `${this.youngInRow} SSE connections in a row ended within ${this.tuning.youngMs} ms`;
  }

  /** An SSE connection has lived past youngMs: SSE works here. */
  sseHealthy(): void {
    this.youngInRow = 0;
    this.probeDelayMs = this.tuning.probeMs;
    this.probeAt = Infinity;
  }

  /** A long-poll was cut after `elapsedMs` while holding: hold shorter next time. */
  pollCut(elapsedMs: number): void {
    if (elapsedMs >= 250) this.cutAfterMs = Math.min(this.cutAfterMs ?? Infinity, elapsedMs);
  }

  /** Hold well under the cut we observed (half of it), never over the configured ceiling. */
  pollHoldMs(): number {
    if (this.cutAfterMs === null) return this.tuning.pollHoldMs;
    return Math.max(200, Math.min(this.tuning.pollHoldMs, Math.floor(this.cutAfterMs / 2)));
  }

  /** On the fallback, whether it is time to try SSE again (switches if so). */
  shouldProbe(now: number): boolean {
    if (!this.fallback || now < this.probeAt) return false;
    this.fallback = false;
    this.transport = 'sse';
    this.youngInRow = this.tuning.youngDeaths - 1; // one more young death goes straight back
    return true;
  }

  private toFallback(): void {
    this.fallback = true;
    this.transport = 'long-poll';
    this.probeAt = Date.now() + this.probeDelayMs * (0.75 + Math.random() * 0.5);
  }
}
