/**
 * Pure encoding of native Murmur events into SSE bytes (spec "Frame format": `id`, `event`, `data`
 * order, one data line, `\n` only), via the one encoder in src/http/sse.ts. A record's bytes are
 * encoded once per process and shared by every connection (the hub hands out the same objects).
 */
import { encodeCommentBytes, encodeSse, encodeSseBytes } from '../../src/http/sse.js';
import type { LogRecord } from '../../src/log/record.js';
import { EVENT } from './constants.js';
import { projectRecord, type MurmurEvent } from './projection.js';

/** Encode one event. Capsule data lines are single lines and pass through byte for byte. */
const encodeEvent = (event: MurmurEvent): string => {
  switch (event.kind) {
    case 'frame':
      return encodeSse({ id: event.id, event: event.event, data: event.data });
    case 'gap':
      return encodeSse({
        event: EVENT.gap,
        data: JSON.stringify({ first_available_id: event.firstAvailableId, reason: event.reason }),
      });
    case 'capsule-closed':
      return encodeSse({ event: EVENT.capsuleClosed, data: '{}' });
  }
};

const recordBytes = new WeakMap<LogRecord, Buffer | null>();

/** The bytes of a record's event (null when it has none), cached per record object. */
export const encodeRecord = (record: LogRecord): Buffer | null => {
  const hit = recordBytes.get(record);
  if (hit !== undefined) return hit;
  const event = projectRecord(record);
  const bytes = event ? Buffer.from(encodeEvent(event), 'utf8') : null;
  recordBytes.set(record, bytes);
  return bytes;
};

/** Spec "Heartbeat": the comment `:heartbeat` then a blank line. */
export const HEARTBEAT_BYTES: Buffer = encodeCommentBytes('heartbeat');

/** Spec "connection-ack": the first frame of every `stream/watch` connection, without an id. */
export const encodeConnectionAck = (mode: 'stateless' | 'threaded'): Buffer =>
  encodeSseBytes({
    event: EVENT.connectionAck,
    data: JSON.stringify({ role: 'observer', conversation_mode: mode }),
  });

/** A `gap` the gateway writes for a cursor (older than retention, or beyond the head). */
export const encodeGap = (firstAvailableId: number, reason: string): Buffer =>
  Buffer.from(encodeEvent({ kind: 'gap', firstAvailableId, reason }), 'utf8');

/** Spec "error": `data` is passed through as written, even when it is not valid JSON. */
export const encodeErrorFrame = (data: string): Buffer => encodeSseBytes({ event: EVENT.error, data });

/** The capsule's `rejected` status, with the id it wrote (always `0`, spec "Event ids"). */
export const encodeRejected = (id: string | null, data: string): Buffer =>
  encodeSseBytes({ id, event: EVENT.status, data });
