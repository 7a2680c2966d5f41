/**
 * The one seam between the BeeOS streams and the SSE transport (src/http/sse-transport.ts): open a
 * `text/event-stream` answer on the request's context and get a stream that takes pre-encoded
 * bytes, with the X-Request-Id every BeeOS answer carries (the transport writes the head itself, so
 * the surface's after-the-handler header would come too late).
 */
import type { Context } from 'hono';
import { startSse } from '../../src/http/sse-transport.js';
import type { SseStream } from '../../src/http/sse-transport.js';
import { HEADER_REQUEST_ID } from './constants.js';

export type BeeosSse = Pick<SseStream, 'open' | 'write' | 'end' | 'onClose' | 'backedUp' | 'waitDrain'>;

export interface BeeosSseOptions {
  /** Comment bytes written every `everyMs` from open. */
  heartbeat?: { bytes: Buffer; everyMs: number };
  /** Bound on bytes queued for the client (transport default 1 MiB); past it the stream ends. */
  maxQueuedBytes?: number;
  /** The bytes to close an overflowing stream with (null: just end it). */
  onOverflow?: () => Buffer | null;
}

/** Open the SSE answer of `c`: the stream to write to and the Response the handler returns. */
export const openSse = (c: Context, options: BeeosSseOptions): { stream: BeeosSse; response: Response } => {
  const rid = c.get('requestId') as string | undefined;
  return startSse(c, {
    ...options,
    headers: { Connection: 'keep-alive', ...(rid ? { [HEADER_REQUEST_ID]: rid } : {}) },
  });
};
