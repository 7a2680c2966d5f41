/**
 * Pure projection of log records into native Murmur events. Frames keep their event type and data
 * byte for byte, with the gateway offset as `id:` when the capsule wrote an id; facts become the
 * gateway's own id-less frames. Encoding is codec.ts's; which events a connection writes is stream.ts's.
 */
import type { LogRecord } from '../../src/log/record.js';
import { viewFrame } from '../../src/log/frame-view.js';
import { EVENT } from './constants.js';

export type MurmurEvent =
  /** A capsule frame. `id` is the gateway offset, or null when the capsule wrote none (spec "Event ids"). */
  | { kind: 'frame'; id: number | null; event: string; data: string }
  /** Frames before `firstAvailableId` may be missing for this client (spec "gap", plus a reason). */
  | { kind: 'gap'; firstAvailableId: number; reason: string }
  /** The capsule closed its frame stream (spec "capsule-closed"). */
  | { kind: 'capsule-closed' };

/**
 * The Murmur event a record stands for, or null when it has none:
 * - `upstream-connected`: the gateway writes its own `connection-ack` at connection open (a replayed
 *   ack would be a second one), so the fact is not repeated; likewise an ack logged as a frame.
 * - `upstream-lost`, `capsule-session-started`: nothing. Watchers stay connected with heartbeats.
 * - `frames-possibly-missing`: a `gap` naming the next offset: frames before it may be gone.
 * - submissions: not Murmur frames (the capsule's own frames of the task follow them).
 */
export const projectRecord = (record: LogRecord): MurmurEvent | null => {
  switch (record.kind) {
    case 'frame':
      if (record.event === EVENT.connectionAck) return null;
      return {
        kind: 'frame',
        id: record.upstreamId === null ? null : record.offset,
        event: record.event,
        data: record.data,
      };
    case 'fact':
      if (record.fact === 'frames-possibly-missing')
        return { kind: 'gap', firstAvailableId: record.offset + 1, reason: record.reason };
      if (record.fact === 'capsule-closed') return { kind: 'capsule-closed' };
      return null;
    case 'submission':
      return null;
  }
};

/** Whether the record is a `status` frame with `"final":true`: what closes a `message/stream`. */
export const isFinalStatus = (record: LogRecord): boolean => {
  if (record.kind !== 'frame' || record.event !== EVENT.status) return false;
  return viewFrame(record)?.final === true;
};
