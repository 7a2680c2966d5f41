/**
 * Cutting the next batch off a capsule's queue. A batch is what one store call appends atomically
 * and what a retry re-sends unchanged (same BatchId, same reset fact), so its bounds keep one Lua
 * call short and it never mixes two ownership terms.
 */
import { storeResetFact, type BatchId } from './store.js';
import type { BatchBounds } from './writer-options.js';
import type { Batch, Lane, Pending } from './writer-lane.js';

/** Take the next batch from `lane.waiting` (withdrawn entries are skipped); null when none is left. */
export const takeBatch = (lane: Lane, bounds: BatchBounds, nextId: () => BatchId): Batch | null => {
  const items: Pending[] = [];
  let bytes = 0;
  let fence: number | undefined;
  while (lane.start < lane.waiting.length && items.length < bounds.maxBatch) {
    const p = lane.waiting[lane.start]!;
    if (!p.withdrawn) {
      if (items.length > 0 && bytes + p.bytes > bounds.maxBatchBytes) break;
      // One token per batch: entries of another ownership term go in the next one.
      if (p.fence !== undefined && fence !== undefined && p.fence !== fence) break;
      fence ??= p.fence;
      items.push(p);
      bytes += p.bytes;
    }
    lane.start++;
  }
  // Taken entries leave the array as soon as it is drained (every batch, unless a backlog is
  // queued): held there, each entry, its batch and its frame lived until 4,096 more were taken, long
  // enough to be promoted to V8's old space (the bulk of what a scavenge copied at 500 frames/s on
  // Redis). A backlog is compacted now and then instead, amortised O(1) per entry.
  if (lane.start === lane.waiting.length) {
    lane.waiting.length = 0;
    lane.start = 0;
  } else if (lane.start > 4096 && lane.start * 2 > lane.waiting.length) {
    lane.waiting = lane.waiting.slice(lane.start);
    lane.start = 0;
  }
  // The marker is now frozen into this batch (a retry re-sends the same entries): later drops
  // start a new run with a new marker.
  if (lane.start === lane.waiting.length) lane.openMarker = null;
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
