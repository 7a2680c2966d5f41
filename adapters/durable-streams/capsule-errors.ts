/**
 * The capsule stream's refusals, in the one error grammar of the Durable Streams surface
 * (stream-errors.ts): `{"error":{"code","message"}}`, never cached, with the §10.7 headers. Built
 * without a hono Context, so the access middleware can answer with it too.
 */
import { streamError, type StreamErrorCode } from './stream-errors.js';

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
