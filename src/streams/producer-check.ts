/**
 * The idempotent-producer validation of PROTOCOL.md §5.2.1, pure. The memory store calls it; the
 * Redis store's append.lua restates it line for line (a script cannot import).
 */
import type { ProducerClaim } from './types.js';

export interface ProducerState {
  epoch: number;
  lastSeq: number;
}

export type ProducerVerdict =
  | { kind: 'accept'; next: ProducerState }
  | { kind: 'duplicate'; state: ProducerState }
  | { kind: 'stale_producer_epoch'; currentEpoch: number }
  | { kind: 'producer_epoch_seq_not_zero' }
  | { kind: 'producer_seq_gap'; expected: number; received: number };

/** What a batch stamped `claim` meets, given the producer's state on this stream (none: a new producer). */
export const checkProducer = (state: ProducerState | undefined, claim: ProducerClaim): ProducerVerdict => {
  // A producer never seen starts its session like a new epoch: at seq 0, any declared epoch.
  if (!state) {
    return claim.seq === 0
      ? { kind: 'accept', next: { epoch: claim.epoch, lastSeq: 0 } }
      : { kind: 'producer_seq_gap', expected: 0, received: claim.seq };
  }
  if (claim.epoch < state.epoch) return { kind: 'stale_producer_epoch', currentEpoch: state.epoch };
  if (claim.epoch > state.epoch) {
    return claim.seq === 0
      ? { kind: 'accept', next: { epoch: claim.epoch, lastSeq: 0 } }
      : { kind: 'producer_epoch_seq_not_zero' };
  }
  if (claim.seq <= state.lastSeq) return { kind: 'duplicate', state };
  if (claim.seq === state.lastSeq + 1)
    return { kind: 'accept', next: { epoch: state.epoch, lastSeq: claim.seq } };
  return { kind: 'producer_seq_gap', expected: state.lastSeq + 1, received: claim.seq };
};
