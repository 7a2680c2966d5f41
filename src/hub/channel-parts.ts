/**
 * What a capsule channel (capsule-channel.ts) talks to: its listeners, its per-context tap, and its
 * settings.
 */
import type { Logger } from 'pino';
import type { LogRecord } from '../log/record.js';
import type { LogPosition } from '../log/store.js';

/** Something attached to a channel: a subscriber or a parked long-poll waiter. */
export interface ChannelListener {
  readonly kind: 'subscriber' | 'waiter';
  /** The surface a subscriber serves, when it says (the delivery-lag metric's label). */
  readonly surface?: string | undefined;
  /**
   * A batch from the tail loop, called synchronously: the SAME array (and record objects) goes to
   * every listener, so per-record encodings can be cached. Must be cheap: it runs on the tail loop.
   */
  push(records: readonly LogRecord[], position: LogPosition): void;
  /**
   * The log went backwards (its head is below what this channel delivered: a store that came back
   * older and has not fenced it with a new epoch yet). The listener's cursor is beyond the head.
   * A new epoch whose offsets continue above is NOT a reset: its records are pushed as usual,
   * opening with the store-reset fact, which each surface turns into its own signal.
   */
  reset(position: LogPosition): void;
  /** The hub is closing. */
  shutdown(): void;
}

export interface ChannelOptions {
  pageSize: number;
  /** How long one store.waitAfter may park before the loop asks again. */
  tailWaitMs: number;
  /** How long the loop lingers after the last listener leaves (a reconnecting client finds it warm). */
  dissolveMs: number;
  /** Pause after a store error before the tail loop retries. */
  retryMs: number;
  /** Recent records kept in memory, so readers near the head are answered without a store read. */
  recentRecords: number;
  logger: Logger;
  /**
   * After each live batch was handed to every listener: the surfaces among them (each once). Runs
   * on the tail loop: whatever it does later (the socket writes happen at the next setImmediate
   * pass), it schedules itself.
   */
  onDelivered?: ((records: readonly LogRecord[], surfaces: readonly string[]) => void) | undefined;
}

/** Sees every tail batch before the listeners do (the hub's per-context index, `context-reads.ts`). */
export interface ChannelTap {
  /** `records` are every record after `after`, up to the last one's offset. */
  batch(after: number, records: readonly LogRecord[], position: LogPosition): void;
  /** The log went backwards: what was seen before is gone. */
  reset(): void;
}
