/**
 * `GET /murmur/{capsule}/records?after=N`: the long-poll's records as an SSE stream, for browsers
 * (the client library's SSE transport). Same records, same JSON, same cursor, same error grammar as
 * `GET /murmur/{capsule}/poll`; only the transport differs.
 *
 *   event: ready    data: {"head":H,"epoch":E}          first, on every connection
 *   event: gap      data: <the poll's gap object>       retention / ahead for the cursor, and before
 *                                                       each frames-possibly-missing fact
 *   id: <offset>
 *   event: record   data: <the poll's record object>    every record after the cursor, in order
 *   :heartbeat                                          every heartbeat interval from connection open
 *
 * Cursor: `Last-Event-ID` (what EventSource sends on its reconnects) wins over `?after=`; both must
 * be non-negative integers. Errors (JSON, before the stream starts): 404 capsule_not_found, 400
 * bad_request, 405 method_not_allowed, 503 store_unavailable / shutting_down, 500 internal.
 */
import { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { LAST_EVENT_ID_HEADER } from './constants.js';
import { openConnection } from './endpoints.js';
import { LogFeed } from './feed.js';
import { pollErrorResponse, pollFailure } from './poll.js';
import { parsePollQuery } from './poll-query.js';
import { encodeReady, RECORDS_FORMAT } from './records-codec.js';

const RECORDS_ROUTE = '/murmur/:capsule/records';

const RECORDS_MESSAGES = {
  lastEventId: 'Last-Event-ID must be a non-negative integer',
} as const;

const OFFSET = /^[0-9]{1,16}$/;

export const createRecordsRoutes = (deps: AdapterDeps): Hono => {
  const { core, config, logger } = deps;
  const app = new Hono();

  app.get(RECORDS_ROUTE, async (c) => {
    const capsule = c.req.param('capsule');
    if (!core.hasCapsule(capsule)) return pollErrorResponse('capsule_not_found', 'no such capsule');
    // `after` is validated exactly as the poll validates it (`wait`/`limit` mean nothing here).
    const parsed = parsePollQuery({ after: c.req.queries('after') ?? [] }, config.longPollMaxMs);
    if (!parsed.ok) return pollErrorResponse('bad_request', parsed.message);
    let cursor = parsed.query.after;
    const header = c.req.header(LAST_EVENT_ID_HEADER);
    if (header !== undefined) {
      const value = header.trim();
      if (!OFFSET.test(value) || !Number.isSafeInteger(Number(value)))
        return pollErrorResponse('bad_request', RECORDS_MESSAGES.lastEventId);
      cursor = Number(value);
    }
    let checked: Awaited<ReturnType<typeof core.cursorStatus>>;
    try {
      checked = await core.cursorStatus(capsule, cursor);
    } catch (err) {
      return pollFailure(err, logger, capsule);
    }
    const { status, position } = checked;
    const { conn, response } = openConnection({ deps, capsule, c });
    conn.write(encodeReady(position));
    let after = cursor;
    if (status !== 'ok') {
      conn.write(RECORDS_FORMAT.cursorGap(position.first, status));
      after = position.first - 1;
    }
    new LogFeed({
      core,
      capsule,
      conn,
      logger,
      maxQueuedRecords: config.maxQueuedRecords,
      retryMs: Math.min(1000, config.heartbeatMs),
      gaps: true,
      closeOnFinal: false,
      capsuleClosedFrame: false,
      format: RECORDS_FORMAT,
    }).start({ after, liveAfter: position.head, epoch: position.epoch });
    return response;
  });

  app.all(RECORDS_ROUTE, () => pollErrorResponse('method_not_allowed', 'use GET', { allow: 'GET, HEAD' }));

  return app;
};
