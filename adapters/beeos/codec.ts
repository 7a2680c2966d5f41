/**
 * Pure encoders for the BeeOS wire: named channel frames (`event: message` + envelope, control
 * events, `end`) and the unnamed invoke frames (BeeOS "Streaming" §2, §3). Bytes via src/http/sse.ts.
 */
import { encodeComment, encodeSse } from '../../src/http/sse.js';
import {
  EVENT_BACKFILL_TRUNCATED,
  EVENT_END,
  EVENT_MESSAGE,
  EVENT_REPLAY_COMPLETE,
  KEEPALIVE_COMMENT,
} from './constants.js';
import type { EndReason } from './constants.js';
import type { Envelope } from './envelope.js';

/** What follows `id: <offset>` in every `event: message` frame (reply-bytes.ts writes it too). */
export const MESSAGE_HEAD = `\nevent: ${EVENT_MESSAGE}\ndata: `;

/**
 * One envelope as `event: message` (encodeSse's frame, byte for byte). The `id:` line carries the
 * offset so an EventSource sends it back as `Last-Event-ID`, which the gateway accepts as an alias
 * of `since`. Written straight into one Buffer: the live path encodes every cumulative reply (the
 * whole body so far) once per record, and going through the frame string flattened a second copy
 * of it on the heap first.
 */
export const encodeEnvelopeBytes = (envelope: Envelope): Buffer => {
  const json = JSON.stringify(envelope);
  const head = `id: ${envelope.offset}${MESSAGE_HEAD}`;
  const jsonBytes = Buffer.byteLength(json, 'utf8');
  const buf = Buffer.allocUnsafe(head.length + jsonBytes + 2);
  let at = buf.write(head, 0, 'latin1');
  at += buf.write(json, at, 'utf8');
  buf[at] = 10;
  buf[at + 1] = 10;
  return buf;
};

export const encodeEnd = (reason: EndReason): string =>
  encodeSse({ event: EVENT_END, data: JSON.stringify({ reason }) });

export const encodeReplayComplete = (latestOffset: number): string =>
  encodeSse({ event: EVENT_REPLAY_COMPLETE, data: JSON.stringify({ latest_offset: latestOffset }) });

export const encodeBackfillTruncated = (oldest: number, since: number, hint: string): string =>
  encodeSse({
    event: EVENT_BACKFILL_TRUNCATED,
    data: JSON.stringify({ oldest_redis_offset: oldest, since, hint }),
  });

const encodeKeepalive = (): string => encodeComment(KEEPALIVE_COMMENT);

/**
 * The keepalive comment as bytes, one Buffer for every stream: a small Buffer made per connection
 * is a slice of Node's shared 8 KB pool and keeps its whole slab alive for the stream's life.
 */
export const KEEPALIVE_BYTES: Buffer = Buffer.from(encodeKeepalive());

/** Invoke SSE frames: unnamed, the type lives in the JSON (BeeOS "Streaming" §2). */
export type InvokeFrame =
  | { type: 'delta'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'error'; code: string; status_code: number; message: string }
  | {
      type: 'done';
      text?: string;
      context_id?: string;
      is_error?: true;
      code?: string;
      error?: string;
    };

export const encodeInvokeFrame = (frame: InvokeFrame): string => encodeSse({ data: JSON.stringify(frame) });
