/**
 * The capsule stream's refusals, in the one error grammar of the Durable Streams surface
 * (stream-errors.ts): `{"error":{"code","message"}}`, never cached, with the §10.7 headers. Built
 * without a hono Context, so the access middleware can answer with it too.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../../src/errors.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';
import { SECURITY_HEADERS, streamError, type StreamErrorCode } from './stream-errors.js';

export type ProblemStatus = 400 | 401 | 403 | 404 | 405 | 410;

const CODE: Record<ProblemStatus, StreamErrorCode> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  410: 'offset_gone',
};

export const STREAM_MESSAGES = {
  notFound: 'no such stream',
  live: 'live must be long-poll or sse',
  readOnly: 'capsule streams are read-only',
  unauthorized: 'credentials required',
  forbidden: 'needs the "observe" scope',
} as const;

export const problem = (
  status: ProblemStatus,
  message: string,
  headers: Record<string, string> = {},
): Response => {
  const error = streamError(CODE[status], message, headers);
  return new Response(error.body, { status, headers: error.headers });
};

/**
 * A failure reading the capsule's log: 503 when the store is out of reach or the gateway drains,
 * 404 for a capsule gone meanwhile, else 500 (logged and counted). The codes are those the capsule
 * streams have always answered with (the long-poll's, whose records they serve); the store's own
 * message is logged only.
 */
export const readFailure = (err: unknown, logger: Logger, capsule: string): Response => {
  const body = (status: number, code: string, message: string): Response =>
    new Response(JSON.stringify({ error: { code, message } }), {
      status,
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
        ...SECURITY_HEADERS,
      },
    });
  if (err instanceof GatewayError && (err.code === 'store_unavailable' || err.code === 'shutting_down')) {
    logger.warn({ err, capsule }, 'capsule stream: log unavailable');
    return body(503, err.code, READ_FAILURE[err.code]);
  }
  if (err instanceof GatewayError && err.code === 'capsule_not_found')
    return body(404, 'capsule_not_found', 'no such capsule');
  countUnexpected('request');
  logger.error({ err, capsule }, 'capsule stream read failed');
  return body(500, 'internal', 'internal error');
};

const READ_FAILURE = {
  store_unavailable: 'log store unavailable',
  shutting_down: 'gateway shutting down',
} as const;
