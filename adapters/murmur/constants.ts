/**
 * Names of the native Murmur surface: paths, headers, query keys, JSON-RPC methods and event types
 * (spec "Endpoints", "Frame format"). Tests import these so the wire names cannot drift.
 */

/** Route patterns, full paths (the app mounts adapters at '/'). */
export const MURMUR_ROUTES = {
  rpc: '/murmur/:capsule/',
  rpcNoSlash: '/murmur/:capsule',
  events: '/murmur/:capsule/events',
} as const;

export const LAST_EVENT_ID_HEADER = 'last-event-id';
/** EventSource cannot set headers on its first request: `?last_event_id=N` stands in. */
export const LAST_EVENT_ID_QUERY = 'last_event_id';

export const METHOD_WATCH = 'stream/watch';

export const EVENT = {
  status: 'status',
  artifact: 'artifact',
  text: 'text',
  thinking: 'thinking',
  gap: 'gap',
  connectionAck: 'connection-ack',
  capsuleClosed: 'capsule-closed',
  error: 'error',
} as const;

/** Spec "Endpoints": both endpoints answer with exactly these, plus X-Accel-Buffering for proxies. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** A JSON content type, as the capsule requires on `POST /` (parameters such as charset allowed). */
export const JSON_CONTENT_TYPE = /^application\/json\s*(;|$)/i;

/** `gap` reasons the gateway writes itself (facts carry their own: cold-attach, capsule-restarted, …). */
export const GAP_REASON = {
  retention: 'retention',
  cursorAhead: 'cursor-ahead',
  /** The store lost the log while this connection was open: offsets restarted. */
  epochChanged: 'epoch-changed',
} as const;

/** Page size for replays read with core.read (message/stream's bounded replay). */
export const REPLAY_PAGE = 500;
