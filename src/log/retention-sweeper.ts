/**
 * Age retention for every capsule the log room knows, on a timer: the stores apply count retention
 * on append, but a capsule that stops receiving frames would otherwise keep records past their age
 * forever ("Housekeeping"). One capsule at a time, so a sweep never bursts the store.
 */
import type { Logger } from 'pino';
import type { LogStore } from './store.js';

export class RetentionSweeper {
  private readonly capsules = new Set<string>();
  private readonly timer: NodeJS.Timeout | null;
  private sweeping = false;
  private stopped = false;

  /** `intervalMs` 0 = never sweep. The timer is unref'd: it never keeps the process alive. */
  constructor(
    private readonly store: LogStore,
    intervalMs: number,
    private readonly logger?: Logger,
  ) {
    this.timer = intervalMs > 0 ? setInterval(() => void this.sweep(), intervalMs) : null;
    this.timer?.unref();
  }

  /** Include this capsule in every sweep from now on (idempotent). */
  track(capsule: string): void {
    this.capsules.add(capsule);
  }

  /** Trim every tracked capsule once; a sweep still running makes this a no-op. */
  async sweep(): Promise<void> {
    if (this.sweeping || this.stopped) return;
    this.sweeping = true;
    try {
      for (const capsule of [...this.capsules]) {
        if (this.stopped) return;
        await this.store.trim(capsule).catch((err: unknown) => {
          this.logger?.debug({ capsule, err: String(err) }, 'log trim failed');
        });
      }
    } finally {
      this.sweeping = false;
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }
}
