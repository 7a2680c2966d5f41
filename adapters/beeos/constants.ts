/**
 * Names of the BeeOS surface: paths, headers, query parameters, SSE event names, offsets and limits.
 * Imported by the routes and by the tests so the two cannot drift (docs/surfaces/beeos.md).
 */

/** Every route lives under this prefix; the agent id is the capsule id. */
export const AGENTS_PREFIX = '/api/v1/agents';

export const HEADER_REQUEST_ID = 'X-Request-Id';
export const HEADER_LAST_EVENT_ID = 'Last-Event-ID';
export const HEADER_AUTHORIZATION = 'Authorization';

export const QUERY_SINCE = 'since';
export const QUERY_LIMIT = 'limit';
export const QUERY_INCLUDE_DELTAS = 'include_deltas';

/** Named SSE events of the task / conversation streams (BeeOS "Streaming" §3, §4). */
export const EVENT_MESSAGE = 'message';
export const EVENT_END = 'end';
export const EVENT_BACKFILL_TRUNCATED = 'backfill_truncated';
export const EVENT_REPLAY_COMPLETE = 'replay_complete';

/** The keepalive comment (`: keepalive`); BeeOS clients skip comments. */
export const KEEPALIVE_COMMENT = ' keepalive';

export type EndReason = 'task_terminal' | 'channel_closed' | 'stream_closed';

/**
 * Envelope offsets are `logOffset * OFFSET_SLOTS + slot`: one log record can project to several
 * envelopes (its v3 frame in slot 0, a legacy per-token chunk in slot 1), each with its own offset,
 * and `since=N` maps back to log record `floor(N / OFFSET_SLOTS)`.
 */
export const OFFSET_SLOTS = 4;
export const SLOT_MAIN = 0;
export const SLOT_DELTA = 1;

/** `GET …/messages` page size (the BeeOS OpenAPI). */
export const MESSAGES_DEFAULT_LIMIT = 200;
export const MESSAGES_MAX_LIMIT = 500;

/** How long a blocking or streaming invoke waits for the task's final status. */
export const DEFAULT_INVOKE_TIMEOUT_MS = 600_000;

/** Page size when reading a capsule's log (registry rebuild, channel projection). */
export const READ_PAGE = 500;
