/**
 * The general streams' error grammar: one code table, every refusal a JSON body
 * `{"error":{"code","message"}}` with the status PROTOCOL.md gives it, plus the protocol headers a
 * client needs to recover (producer epochs, expected sequence, the tail of a closed stream).
 */
import type { Context } from 'hono';
import { bearerChallenge, type Principal } from '../../src/auth/principal.js';

const STREAM_ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  stale_producer_epoch: 403,
  not_found: 404,
  method_not_allowed: 405,
  content_type_mismatch: 409,
  stream_exists: 409,
  stream_seq_conflict: 409,
  producer_seq_gap: 409,
  stream_closed: 409,
  source_gone: 409,
  offset_gone: 410,
  stream_gone: 410,
  body_too_large: 413,
  message_too_large: 413,
  rate_limited: 429,
  too_many_streams: 507,
  internal: 500,
  not_implemented: 501,
  unavailable: 503,
} as const;

export type StreamErrorCode = keyof typeof STREAM_ERROR_STATUS;

/** §10.7: on every response of the surface, errors included. */
export const SECURITY_HEADERS: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'cross-origin-resource-policy': 'cross-origin',
};

export interface StreamError {
  body: string;
  status: (typeof STREAM_ERROR_STATUS)[StreamErrorCode];
  headers: Record<string, string>;
}

/** Every refusal's body and headers, whether answered through a hono Context or without one. */
export const streamError = (
  code: StreamErrorCode,
  message: string,
  headers: Record<string, string> = {},
): StreamError => ({
  body: JSON.stringify({ error: { code, message } }),
  status: STREAM_ERROR_STATUS[code],
  headers: {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...SECURITY_HEADERS,
    ...headers,
  },
});

export const streamProblem = (
  c: Context,
  code: StreamErrorCode,
  message: string,
  headers: Record<string, string> = {},
): Response => {
  const error = streamError(code, message, headers);
  return c.body(error.body, error.status, error.headers);
};

/** The headers of a 401 to an anonymous caller: the Bearer challenge, `invalid_token` once refused. */
export const unauthorizedHeaders = (p: Principal): Record<string, string> => ({
  'www-authenticate': bearerChallenge(p),
});

/** A soft-deleted stream: deleted or expired, kept only for the forks that read its messages. */
export const GONE_MESSAGE = 'the stream was deleted (its forks still read its messages)';

/** The gateway's abuse bounds (limits-middleware.ts) on this surface: 429 with Retry-After. */
export const streamsRateLimitedError = (retryAfterSeconds: number): StreamError =>
  streamError('rate_limited', 'too many requests, retry later', {
    'retry-after': String(retryAfterSeconds),
  });

export const streamsRateLimited = (c: Context, retryAfterSeconds: number): Response => {
  const error = streamsRateLimitedError(retryAfterSeconds);
  return c.body(error.body, error.status, error.headers);
};
