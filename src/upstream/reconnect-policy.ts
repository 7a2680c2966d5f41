/**
 * When to open the next `stream/watch` connection. After a connection the capsule acknowledged, at
 * once (a small jitter): every moment away is a moment whose task-start (id 0) frames no replay will
 * bring back (spec "Replay"). Exponential backoff only for attempts that never reached the capsule.
 * A rate cap keeps a capsule that accepts and drops connections in a loop from spinning ours.
 */
export interface ReconnectPolicyOptions {
  backoffBaseMs: number;
  backoffCapMs: number;
  /** Jitter after an established connection ended (ms). */
  jitterMs?: number;
  /** At most this many connection attempts start in any one second. */
  maxPerSecond?: number;
}

export class ReconnectPolicy {
  private failures = 0;
  private readonly starts: number[] = [];
  private readonly jitterMs: number;
  private readonly maxPerSecond: number;

  constructor(private readonly options: ReconnectPolicyOptions) {
    this.jitterMs = options.jitterMs ?? 50;
    this.maxPerSecond = options.maxPerSecond ?? 10;
  }

  /** The capsule acknowledged the last connection: the next attempt goes out almost at once. */
  afterEstablished(): number {
    this.failures = 0;
    return Math.round(Math.random() * this.jitterMs);
  }

  /** An attempt failed before the ack (or the store was unavailable): back off exponentially. */
  afterFailure(): number {
    const { backoffBaseMs: base, backoffCapMs: cap } = this.options;
    const ceiling = Math.min(cap, base * 2 ** Math.min(this.failures++, 20));
    // Full jitter: uniform in [base/2, ceiling], so a fleet does not reconnect in step.
    return Math.round(base / 2 + Math.random() * Math.max(0, ceiling - base / 2));
  }

  /** How long to wait before starting an attempt now so the rate cap holds; records the start. */
  startDelay(now = Date.now()): number {
    while (this.starts.length > 0 && this.starts[0]! <= now - 1000) this.starts.shift();
    const wait = this.starts.length >= this.maxPerSecond ? this.starts[0]! + 1000 - now : 0;
    this.starts.push(now + wait);
    return wait;
  }
}
