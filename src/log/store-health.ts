/**
 * Whether this replica reaches its store now, decided by a probe with a deadline every `probeMs`:
 * unreachable once no probe succeeded for `unreachableAfterMs`, reachable again at the first answer.
 * The hub ends its readers on the change (they resume on a replica that does reach the store) and
 * refuses reads meanwhile, so a replica cut from Redis says so in seconds instead of serving silence.
 *
 * Only silence this process was awake to hear counts. After a stall (SIGSTOP, a long pause, a
 * starved CPU) the timers that judge run before the poll phase that would read the answer already
 * waiting in the socket: judged by the wall clock alone, every pause past `unreachableAfterMs` would
 * end every live reader of a replica whose store never went away.
 */
import type { Logger } from 'pino';
import { withTimeout } from '../timeouts.js';

export interface StoreHealthOptions {
  /** One probe: true when the store answered. Rejections count as no answer. */
  ping: () => Promise<boolean>;
  probeMs: number;
  unreachableAfterMs: number;
  logger?: Logger;
}

export class StoreHealth {
  private reachableNow = true;
  private lastAnswer = Date.now();
  /** When the probe interval last ran (or a judgement was made): a tick later than due was slept through. */
  private lastTick = Date.now();
  private timer: NodeJS.Timeout | null = null;
  private probing = false;
  private readonly listeners = new Set<(reachable: boolean) => void>();
  /** When the store was last found unreachable (for logs and /readyz-like views). */
  private downSince: number | null = null;

  constructor(private readonly options: StoreHealthOptions) {}

  get reachable(): boolean {
    return this.reachableNow;
  }

  /** Milliseconds since the store became unreachable (0 while it is reachable). */
  get unreachableForMs(): number {
    return this.downSince === null ? 0 : Date.now() - this.downSince;
  }

  /** Called on every change, with the new state. */
  onChange(listener: (reachable: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    if (this.timer) return;
    this.lastAnswer = Date.now();
    this.lastTick = this.lastAnswer;
    this.timer = setInterval(() => this.probe(), this.options.probeMs);
    this.timer.unref();
  }

  /** Probe now (the connection was just re-established): reads resume as soon as the store answers. */
  poke(): void {
    if (this.timer) this.probe();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  private probe(): void {
    this.check();
    if (this.probing) return; // the previous probe has not answered: its deadline decides
    this.probing = true;
    const answered = this.options.ping().catch(() => false);
    void withTimeout(answered, this.options.unreachableAfterMs, () => false).then((ok) => {
      this.probing = false;
      if (ok) {
        this.lastAnswer = Date.now();
        this.set(true);
      } else {
        this.check();
      }
    });
  }

  private check(): void {
    const now = Date.now();
    this.discountStall(now);
    if (now - this.lastAnswer >= this.options.unreachableAfterMs) this.set(false);
  }

  /**
   * The time between when the next tick was due and when it ran, the loop did not listen: the
   * silence so far is shortened by it. A real partition is still found after `unreachableAfterMs`
   * of time awake.
   */
  private discountStall(now: number): void {
    const late = now - this.lastTick - this.options.probeMs;
    if (late > 0) this.lastAnswer = Math.min(now, this.lastAnswer + late);
    this.lastTick = now;
  }

  private set(reachable: boolean): void {
    if (this.reachableNow === reachable || this.timer === null) return;
    this.reachableNow = reachable;
    this.downSince = reachable ? null : Date.now();
    this.options.logger?.warn(
      { reachable, silentMs: Date.now() - this.lastAnswer },
      reachable ? 'store reachable again' : 'store unreachable: ending live readers, refusing reads',
    );
    for (const listener of [...this.listeners]) listener(reachable);
  }
}
