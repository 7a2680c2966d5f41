/**
 * Pure encoders for the BeeOS wire: named channel frames (`event: message` + envelope, control
 * events, `end`) and the unnamed invoke frames (beeos-streaming.md §2, §3). Bytes via src/http/sse.ts.
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
import type { Envelope } from './projection.js';

/**
 * One envelope as `event: message`. The `id:` line carries the offset so an EventSource sends it
 * back as `Last-Event-ID`, which the gateway accepts as an alias of `since`.
 */
export const encodeEnvelope = (envelope: Envelope): string =>
  encodeSse({ id: envelope.offset, event: EVENT_MESSAGE, data: JSON.stringify(envelope) });

export const encodeEnd = (reason: EndReason): string =>
  encodeSse({ event: EVENT_END, data: JSON.stringify({ reason }) });

export const encodeReplayComplete = (latestOffset: number): string =>
  encodeSse({ event: EVENT_REPLAY_COMPLETE, data: JSON.stringify({ latest_offset: latestOffset }) });

export const encodeBackfillTruncated = (oldest: number, since: number, hint: string): string =>
  encodeSse({
    event: EVENT_BACKFILL_TRUNCATED,
    data: JSON.stringify({ oldest_redis_offset: oldest, since, hint }),
  });

export const encodeKeepalive = (): string => encodeComment(KEEPALIVE_COMMENT);

/**
 * The keepalive comment as bytes, one Buffer for every stream: a small Buffer made per connection
 * is a slice of Node's shared 8 KB pool and keeps its whole slab alive for the stream's life.
 */
export const KEEPALIVE_BYTES: Buffer = Buffer.from(encodeKeepalive());

/** Invoke SSE frames: unnamed, the type lives in the JSON (beeos-streaming.md §2). */
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
