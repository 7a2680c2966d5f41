/**
 * The two answers that make queued entries untrue. A store that lost records begins a new epoch:
 * frames queued here came after the lost ones, so they are discarded and the capsule's
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
  lane.raiseFloor(...result.offsets);
  logger?.warn({ capsule: lane.capsule, epoch: result.epoch }, 'log store regressed: new epoch');
  const discarded = new GatewayError('store_unavailable', 'log store was reset: frame discarded', {
    discarded: true,
  });
  for (const p of lane.sift(batch, (p) => p.entry.kind === 'frame', false))
    room.settle(lane, p, null, discarded);
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
  const stamped = (p: Pending): boolean => p.fence !== undefined && p.fence <= fence;
  for (const p of lane.sift(batch, stamped, true)) room.settle(lane, p, null, refused);
  for (const listener of listeners) {
    try {
      listener(lane.capsule, fence);
    } catch (err) {
      logger?.error({ capsule: lane.capsule, err: String(err) }, 'onFenced listener threw');
    }
  }
};
