/**
 * The room in each capsule's queue: a bound in entries and bytes so a store that is away cannot
 * exhaust memory, hysteresis down to a low-water mark so a full queue does not flap per entry, and
 * one `frames-possibly-missing` fact where each run of drops began, because the log must say that
 * frames are missing. Every settled entry gives its room back here.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { LogEntry } from './record.js';
import type { QueueBounds } from './writer-options.js';
import { approxBytes, type Appended, type Lane, type Pending } from './writer-lane.js';

export const noop = (): void => {};

export const withdrawnError = (): GatewayError =>
  new GatewayError('store_unavailable', 'log store unavailable: entry withdrawn before it was sent', {
    withdrawn: true,
  });

export class LaneRoom {
  constructor(
    private readonly bounds: QueueBounds,
    private readonly closed: () => boolean,
    /** Called after every queued entry: the writer sends a batch when it can. */
    private readonly schedule: (lane: Lane) => void,
    private readonly logger: Logger | undefined,
  ) {}

  /** Full: over a bound, or still refusing since an overflow (hysteresis down to the low water). */
  full(lane: Lane, bytes: number): boolean {
    return (
      lane.overflowing || lane.count >= this.bounds.maxEntries || lane.bytes + bytes > this.bounds.maxBytes
    );
  }

  push(lane: Lane, pending: Pending): void {
    // Submissions and withdrawals come from any replica (a client's request): never fenced.
    const fromAnyReplica =
      pending.entry.kind === 'submission' ||
      (pending.entry.kind === 'fact' && pending.entry.fact === 'submission-withdrawn');
    lane.enqueue(pending, fromAnyReplica);
    this.schedule(lane);
  }

  /**
   * Count a dropped entry on the fact that sits exactly where this run of drops began. The marker
   * itself is queued past the bound (one small fact per run): the log must say frames are missing.
   */
  drop(lane: Lane, entry: LogEntry): void {
    if (lane.noteDrop()) {
      this.logger?.warn(
        { capsule: lane.capsule, queued: lane.count, bytes: lane.bytes },
        'log queue full: dropping',
      );
    }
    let marker = lane.openMarker;
    if (!marker) {
      marker = {
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'store-unavailable',
        count: 0,
        receivedAt: entry.receivedAt,
      };
      this.push(lane, {
        entry: marker,
        bytes: approxBytes(marker),
        resolve: noop,
        reject: noop,
        batch: null,
      });
      lane.openRun(marker);
    }
    if (entry.kind === 'frame') marker.count = (marker.count ?? 0) + 1;
  }

  /** Resolve or reject one entry and release its room. */
  settle(lane: Lane, p: Pending, value: Appended | null, err?: Error): void {
    lane.release(p);
    if (p.onAbort) p.signal?.removeEventListener('abort', p.onAbort);
    if (value) p.resolve(value);
    else p.reject(err ?? withdrawnError());
    this.roomNow(lane);
  }

  /** Leave overflow once below the low-water mark of both bounds, and wake `whenRoom` waiters. */
  roomNow(lane: Lane): void {
    const below = lane.count <= this.bounds.lowEntries && lane.bytes <= this.bounds.lowBytes;
    if (lane.overflowing && !below && !this.closed()) return;
    lane.leaveOverflow();
  }
}
