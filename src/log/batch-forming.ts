/**
 * Cutting the next batch off a capsule's queue. A batch is what one store call appends atomically
 * and what a retry re-sends unchanged (same BatchId, same reset fact), so its bounds keep one Lua
 * call short and it never mixes two ownership terms.
 */
import { storeResetFact, type BatchId } from './store.js';
import type { BatchBounds } from './writer-options.js';
import type { Batch, Lane, Pending } from './writer-lane.js';

/** Take the next batch from the lane's queue (withdrawn entries are skipped); null when none is left. */
export const takeBatch = (lane: Lane, bounds: BatchBounds, nextId: () => BatchId): Batch | null => {
  const items: Pending[] = [];
  let bytes = 0;
  let fence: number | undefined;
  for (let p = lane.peek(); p && items.length < bounds.maxBatch; p = lane.peek()) {
    if (!p.withdrawn) {
      if (items.length > 0 && bytes + p.bytes > bounds.maxBatchBytes) break;
      // One token per batch: entries of another ownership term go in the next one.
      if (p.fence !== undefined && fence !== undefined && p.fence !== fence) break;
      fence ??= p.fence;
      items.push(p);
      bytes += p.bytes;
    }
    lane.advance();
  }
  lane.releaseTaken();
  if (items.length === 0) return null;
  const batch: Batch = {
    id: nextId(),
    items,
    resetFact: storeResetFact(),
    maybeSent: false,
    attempting: false,
    ...(fence !== undefined ? { fence } : {}),
  };
  for (const p of items) p.batch = batch;
  return batch;
};
