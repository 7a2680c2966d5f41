/**
 * Names on the Flue wire (Flue's streaming protocol): headers, query parameters, SSE events, limits.
 * Tests import these too. Behaviour lives in routes.ts / live.ts; nothing here decides anything.
 */

export const HEADER = {
  nextOffset: 'Stream-Next-Offset',
  upToDate: 'Stream-Up-To-Date',
  location: 'Location',
  cacheControl: 'Cache-Control',
  contentType: 'Content-Type',
  allow: 'Allow',
  retryAfter: 'Retry-After',
  idempotencyKey: 'Idempotency-Key',
} as const;

/** §Fixed response headers: on every read and error response. */
export const FIXED_HEADERS: Readonly<Record<string, string>> = {
  'X-Content-Type-Options': 'nosniff',
  'Cross-Origin-Resource-Policy': 'cross-origin',
};

export const QUERY = {
  view: 'view',
  offset: 'offset',
  live: 'live',
  tail: 'tail',
  wait: 'wait',
} as const;

export const VIEW = { history: 'history', updates: 'updates' } as const;
export const LIVE = { longPoll: 'long-poll', sse: 'sse' } as const;

/** SSE event names (§live=sse). */
export const SSE_EVENT = { data: 'data', control: 'control' } as const;
export const HEARTBEAT_COMMENT = ' heartbeat';

/** §Offsets: the sentinel for "before the first batch". */
export const ORIGIN_OFFSET = '-1';

/** §updates: one response covers at most 100 durable batches. */
export const UPDATES_PAGE = 100;
/** Page size used when rebuilding a conversation's state from the log (internal, not on the wire). */
export const SCAN_PAGE = 1000;

/** §POST: image data longer than this many base64 characters is refused. */
export const MAX_ATTACHMENT_CHARS = 14 * 1024 * 1024;
/** SDK `idempotencyKey`: at most 256 characters. */
export const MAX_IDEMPOTENCY_KEY = 256;
/** §POST signal `tagName`. */
export const TAG_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** Data-part name under which capsule input waits are shown (see docs/surfaces/flue.md). */
export const INPUT_PART = 'input-required';

/** `meta.flue` values of the surface's own submission records (see docs/surfaces/flue.md). */
export const RECORD_KIND = { message: 'message', settlement: 'settlement' } as const;
