/**
 * Readers waiting at a stream's tail, inside one process. A store calls `wake(path)` after every
 * append, close or delete it makes or hears of (Redis: every replica's, through pub/sub); a woken
 * waiter re-checks the store itself, so a spurious wake costs one read and a missed one only delays
 * a waiter until its timeout.
 */
import type { WaitOutcome } from './types.js';
import { withTimeout } from '../timeouts.js';

export class StreamWaiters {
  private readonly byPath = new Map<string, Set<() => void>>();

  wake(path: string): void {
    const set = this.byPath.get(path);
    if (!set) return;
    this.byPath.delete(path);
    for (const fn of set) fn();
  }

  /**
   * Until `ready()` is true (checked now and after each wake), `timeoutMs` passes or `signal`
   * aborts. Registered before the first check, so an append between check and wait is never missed.
   */
  async waitUntil(
    path: string,
    ready: () => Promise<boolean>,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<WaitOutcome> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (signal.aborted) return { ready: false };
      let woken!: () => void;
      const wake = new Promise<void>((resolve) => (woken = resolve));
      const set = this.byPath.get(path) ?? new Set<() => void>();
      set.add(woken);
      this.byPath.set(path, set);
      const release = (): void => {
        const current = this.byPath.get(path);
        current?.delete(woken);
        if (current?.size === 0) this.byPath.delete(path);
      };
      try {
        if (await ready()) return { ready: true };
        const left = deadline - Date.now();
        if (left <= 0) return { ready: false };
        const onAbort = (): void => woken();
        signal.addEventListener('abort', onAbort, { once: true });
        // Aborted while ready() ran: no event will come.
        if (signal.aborted) woken();
        await withTimeout(wake, left);
        signal.removeEventListener('abort', onAbort);
        if (Date.now() >= deadline) return { ready: await ready() };
      } finally {
        release();
      }
    }
  }
}
