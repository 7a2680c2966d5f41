/**
 * `GET /murmur/{capsule}/poll?after=N&wait=S&limit=L`: the long-poll over a capsule's log (contract
 * "Native Murmur"). Thin: query in poll-query.ts, body in poll-json.ts, waiting in the hub.
 *
 * Query: `after` (default 0) a non-negative integer offset; `wait` (default 0) seconds in [0, 30],
 * decimals allowed; `limit` (default 100) in [1, 1000]. Unknown parameters are ignored; a repeated one
 * is refused. Records after `after` answer at once; with none, the poll waits up to `wait` seconds.
 *
 * 200 body:
 *   {
 *     "records": [
 *       {"offset": 7, "kind": "frame", "event": "text", "id": "12" | null,
 *        "data": "<the capsule's data line, byte for byte, a string: it may be invalid JSON>",
 *        "received_at": "2025-01-01T00:00:00.000Z"},
 *       {"offset": 8, "kind": "fact", "fact": "frames-possibly-missing", "reason": "gap",
 *        "count"?: 3, "first_available_id"?: "40", "received_at": "…"},
 *       {"offset": 9, "kind": "fact", "fact": "upstream-connected", "ack": "<data line>", "attempt": 1,
 *        "received_at": "…"}        (also upstream-lost {reason}, capsule-closed,
 *                                    capsule-session-started {reason})
 *       {"offset": 10, "kind": "submission", "protocol": "beeos", "owner": "alice" | null,
 *        "context_id": "…", "message_id": "…", "text": "…", "meta"?: {…}, "received_at": "…"}
 *     ],
 *     "next_cursor": 10,     // pass as `after` next time (see gap for starting over)
 *     "head": 10, "epoch": 1736000000000,
 *     "gap": null
 *       | {"reason": "retention", "first_available": N}  // records after `after` were trimmed
 *       | {"reason": "ahead", "first_available": N}      // `after` > head (or another epoch): start
 *                                                        //   over; next_cursor = N - 1, no records
 *       | {"reason": "possibly_missing", "first_available": F + 1, "fact_offset": F,
 *          "missing_reason": "gap" | "cold-attach" | …, "count"?: n}  // earliest such fact in page
 *   }
 * Errors: `{"error": {"code": "bad_request" | "capsule_not_found" | "method_not_allowed" |
 * "store_unavailable" | "shutting_down" | "internal", "message": "…"}}` with 400/404/405/503/503/500.
 * An unknown capsule is 404 before the query is looked at. A client that goes away while its poll
 * is parked is forgotten at once (the request's abort signal reaches the hub's waiter).
 */
import { Hono, type Context } from 'hono';
import { linkSignals } from '../../src/core/linked-signal.js';
import { GatewayError } from '../../src/errors.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { pollBodyBytes } from './poll-pages.js';
import { parsePollQuery } from './poll-query.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';

const POLL_ROUTE = '/murmur/:capsule/poll';

export type PollErrorCode =
  | 'bad_request'
  | 'capsule_not_found'
  | 'method_not_allowed'
  | 'store_unavailable'
  | 'shutting_down'
  | 'internal';

const STATUS: Record<PollErrorCode, 400 | 404 | 405 | 500 | 503> = {
  bad_request: 400,
  capsule_not_found: 404,
  method_not_allowed: 405,
  store_unavailable: 503,
  shutting_down: 503,
  internal: 500,
};

/** The poll route's error body, in the one JSON error grammar of this route. */
const pollErrorBody = (code: PollErrorCode, message: string): string =>
  JSON.stringify({ error: { code, message } });

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

const fail = (c: Context, code: PollErrorCode, message: string, headers: Record<string, string> = {}) =>
  c.body(pollErrorBody(code, message), STATUS[code], { ...JSON_HEADERS, ...headers });

/** An error answer in this route's grammar, for the routes that share it (records.ts). */
export const pollErrorResponse = (
  code: PollErrorCode,
  message: string,
  headers: Record<string, string> = {},
): Response =>
  new Response(pollErrorBody(code, message), {
    status: STATUS[code],
    headers: { ...JSON_HEADERS, ...headers },
  });

/** Public messages of the failures: the error's own message (a Redis or socket error) is logged only. */
const FAILURE_MESSAGE = {
  store_unavailable: 'log store unavailable',
  shutting_down: 'gateway shutting down',
} as const;

/** A failure reading the log, as this grammar answers it (503 for an absent store or a drain). */
export const pollFailure = (err: unknown, logger: AdapterDeps['logger'], capsule: string): Response => {
  if (err instanceof GatewayError && (err.code === 'store_unavailable' || err.code === 'shutting_down')) {
    logger.warn({ err, capsule }, 'murmur poll: log unavailable');
    return pollErrorResponse(err.code, FAILURE_MESSAGE[err.code]);
  }
  if (err instanceof GatewayError && err.code === 'capsule_not_found')
    return pollErrorResponse('capsule_not_found', 'no such capsule');
  countUnexpected('request');
  logger.error({ err, capsule }, 'murmur poll failed');
  return pollErrorResponse('internal', 'internal error');
};

/** Routes of the long-poll, with full paths (mounted at '/'). */
export const createPollRoutes = (deps: AdapterDeps): Hono => {
  const { core, config, logger } = deps;
  const app = new Hono();

  app.get(POLL_ROUTE, async (c) => {
    const capsule = c.req.param('capsule');
    if (!core.hasCapsule(capsule)) return fail(c, 'capsule_not_found', 'no such capsule');
    const parsed = parsePollQuery(c.req.queries(), config.longPollMaxMs);
    if (!parsed.ok) return fail(c, 'bad_request', parsed.message);
    const { after, limit, waitMs } = parsed.query;
    try {
      let page: { records: readonly LogRecord[]; position: LogPosition };
      const { status, position } = await core.cursorStatus(capsule, after);
      if (status === 'ahead') {
        page = { records: [], position }; // never wait on a cursor the log has not reached
      } else if (status === 'gone' || waitMs === 0) {
        page = await core.read(capsule, after, limit);
      } else {
        const linked = linkSignals(c.req.raw.signal, core.shutdownSignal);
        try {
          page = await core.waitAfter(capsule, after, limit, waitMs, linked.signal);
        } finally {
          linked.release();
        }
      }
      return c.body(pollBodyBytes(after, page.records, page.position), 200, JSON_HEADERS);
    } catch (err) {
      return pollFailure(err, logger, capsule);
    }
  });

  app.all(POLL_ROUTE, (c) => fail(c, 'method_not_allowed', 'use GET', { allow: 'GET, HEAD' }));

  return app;
};
