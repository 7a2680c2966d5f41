/**
 * takeBatch: batches in queue order within their bounds, and taken entries released from the lane's
 * queue once it is drained (held there, they outlived a V8 scavenge and were promoted).
 */
import { describe, expect, it } from 'vitest';
import { takeBatch } from '../../src/log/batch-forming.js';
import { approxBytes, Lane, type Pending } from '../../src/log/writer-lane.js';
import { frame } from './store.contract.js';

const queue = (lane: Lane, labels: string[]): void => {
  for (const label of labels) {
    const entry = frame(label);
    const p: Pending = { entry, bytes: approxBytes(entry), resolve: () => {}, reject: () => {}, batch: null };
    lane.enqueue(p);
  }
};

const labels = (items: Pending[]): (string | null)[] =>
  items.map((p) => (p.entry.kind === 'frame' ? p.entry.upstreamId : null));

let seq = 0;
const id = () => ({ writerId: 'w', seq: ++seq });

describe('takeBatch', () => {
  it('takes entries in order within maxBatch, and empties the queue once drained', () => {
    const lane = new Lane('c');
    queue(lane, ['a', 'b', 'c']);
    const first = takeBatch(lane, { maxBatch: 2, maxBatchBytes: 1 << 20 }, id)!;
    expect(labels(first.items)).toEqual(['a', 'b']);
    expect(lane.waitingCount).toBe(1); // a backlog stays queued
    const second = takeBatch(lane, { maxBatch: 2, maxBatchBytes: 1 << 20 }, id)!;
    expect(labels(second.items)).toEqual(['c']);
    // Drained: nothing taken is still referenced by the queue.
    expect(lane.retainedCount).toBe(0);
    expect(takeBatch(lane, { maxBatch: 2, maxBatchBytes: 1 << 20 }, id)).toBeNull();
    queue(lane, ['d']);
    expect(labels(takeBatch(lane, { maxBatch: 2, maxBatchBytes: 1 << 20 }, id)!.items)).toEqual(['d']);
  });
});
