/**
 * The two answers that make queued entries untrue. A store that lost records begins a new epoch
 *: frames queued here came after the lost ones, so they are discarded and the capsule's
 * replay re-delivers what it still holds. A store that refuses a batch as fenced (src/fleet)
 * says another replica owns the capsule: this term's frames and facts will never be appended. In both
 * cases submissions stay queued, in order, because any replica may record one.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { LaneRoom } from './lane-room.js';
import type { AppendResult } from './store.js';
import type { Batch, Lane, Pending } from './writer-lane.js';

/**
 * The same replica's previous term, with nobody in between: its queued entries (stamped `adopt`)
 * are still true, so they carry the new token `fence`.
 */
export const adoptFence = (lane: Lane, fence: number, adopt: number): void => {
  for (let i = lane.start; i < lane.waiting.length; i++) {
    const p = lane.waiting[i]!;
    if (p.fence === adopt) p.fence = fence;
  }
  // A retry of the batch in flight is safe under the new token: the dedup check comes first.
  if (lane.inFlight && lane.inFlight.fence === adopt) {
    lane.inFlight.fence = fence;
    for (const p of lane.inFlight.items) if (p.fence === adopt) p.fence = fence;
  }
};

/**
 * The store lost records and began a new epoch with only the reset fact. Frames queued here came
 * after the lost ones: they are discarded (the capsule's replay re-delivers what it still holds,
 * once the ingestor re-read its tail). Submissions and facts are re-queued, in order, first.
 */
export const afterStoreReset = (
  lane: Lane,
  batch: Batch,
  result: AppendResult,
  room: LaneRoom,
  listeners: Iterable<(capsule: string) => void>,
  logger: Logger | undefined,
): void => {
  lane.floor = Math.max(lane.floor, ...result.offsets);
  logger?.warn({ capsule: lane.capsule, epoch: result.epoch }, 'log store regressed: new epoch');
  const discarded = new GatewayError('store_unavailable', 'log store was reset: frame discarded', {
    discarded: true,
  });
  const kept: Pending[] = [];
  for (const p of [...batch.items, ...lane.waiting.slice(lane.start)]) {
    if (p.withdrawn) continue;
    if (p.entry.kind === 'frame') {
      lane.discarded++;
      room.settle(lane, p, null, discarded);
    } else {
      p.batch = null;
      kept.push(p);
    }
  }
  lane.waiting = kept;
  lane.start = 0;
  for (const listener of listeners) {
    try {
      listener(lane.capsule);
    } catch (err) {
      logger?.error({ capsule: lane.capsule, err: String(err) }, 'onReset listener threw');
    }
  }
};

/**
 * Another replica took the capsule over (a newer token): this term's frames and facts will never
 * be appended (the new owner's replay restores what the capsule still holds); submissions are
 * re-queued, in order, without the token. Then the listeners stop the ingestion.
 */
export const afterFenced = (
  lane: Lane,
  batch: Batch,
  fence: number,
  room: LaneRoom,
  listeners: Iterable<(capsule: string, fence: number) => void>,
  logger: Logger | undefined,
): void => {
  logger?.warn({ capsule: lane.capsule, fence }, 'append fenced: another replica owns the capsule');
  const refused = new GatewayError('store_unavailable', 'fenced: another replica owns this capsule', {
    fenced: true,
  });
  const kept: Pending[] = [];
  for (const p of [...batch.items, ...lane.waiting.slice(lane.start)]) {
    if (p.withdrawn) continue;
    if (p.fence !== undefined && p.fence <= fence) {
      lane.discarded++;
      room.settle(lane, p, null, refused);
    } else {
      p.batch = null;
      kept.push(p);
    }
  }
  lane.waiting = kept;
  lane.start = 0;
  lane.openMarker = null;
  for (const listener of listeners) {
    try {
      listener(lane.capsule, fence);
    } catch (err) {
      logger?.error({ capsule: lane.capsule, err: String(err) }, 'onFenced listener threw');
    }
  }
};
