/**
 * Flue's error grammar (§Error responses): one table from error type to status, the envelope, and the
 * mapping of core `GatewayError` codes. Every error response carries the fixed headers.
 */
import type { GatewayErrorCode } from '../../src/errors.js';
import { FIXED_HEADERS, HEADER } from './constants.js';

export type FlueErrorType =
  | 'invalid_request'
  | 'invalid_json'
  | 'unauthorized'
  | 'forbidden'
  | 'stream_not_found'
  | 'agent_instance_not_found'
  | 'attachment_not_found'
  | 'method_not_allowed'
  | 'agent_instance_exists'
  | 'submission_conflict'
  | 'stream_offset_gone'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'runtime_unavailable'
  | 'conversation_stream_store_failure'
  | 'internal_error';

const ERROR_STATUS: Record<FlueErrorType, number> = {
  invalid_request: 400,
  invalid_json: 400,
  // Fatal to @flue/sdk: a bad credential is not retried.
  unauthorized: 401,
  forbidden: 403,
  stream_not_found: 404,
  agent_instance_not_found: 404,
  attachment_not_found: 404,
  method_not_allowed: 405,
  agent_instance_exists: 409,
  submission_conflict: 409,
  // The spec's 500 for a foreign or future offset would make the SDK retry forever; 416 makes it
  // restart from -1 (as @flue/sdk does), which is what a lost store generation needs.
  stream_offset_gone: 416,
  payload_too_large: 413,
  unsupported_media_type: 415,
  // Retried by @flue/sdk after Retry-After: a full submission queue.
  rate_limited: 429,
  runtime_unavailable: 503,
  conversation_stream_store_failure: 500,
  internal_error: 500,
};

/** A Flue error to render; thrown by route helpers and caught in one place. */
export class FlueError extends Error {
  constructor(
    readonly type: FlueErrorType,
    message: string,
    readonly details = '',
    readonly meta?: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'FlueError';
  }
}

/** The canonical envelope `{error: {type, message, details, meta?}}`. */
export const errorBody = (e: FlueError): string =>
  JSON.stringify({
    error: { type: e.type, message: e.message, details: e.details, ...(e.meta ? { meta: e.meta } : {}) },
  });

/** Render a FlueError; `withBody: false` for HEAD (§HEAD: error headers, no body). */
export const errorResponse = (e: FlueError, withBody = true): Response =>
  new Response(withBody ? errorBody(e) : null, {
    status: ERROR_STATUS[e.type],
    headers: { [HEADER.contentType]: 'application/json', ...FIXED_HEADERS, ...e.headers },
  });

const CORE_ERRORS: Record<GatewayErrorCode, FlueErrorType> = {
  capsule_not_found: 'stream_not_found',
  cursor_gone: 'stream_offset_gone',
  cursor_ahead: 'stream_offset_gone',
  bad_request: 'invalid_request',
  payload_too_large: 'payload_too_large',
  upstream_unreachable: 'runtime_unavailable',
  upstream_busy: 'runtime_unavailable',
  queue_full: 'rate_limited',
  upstream_invalid: 'internal_error',
  upstream_method_not_found: 'internal_error',
  upstream_timeout: 'runtime_unavailable',
  store_unavailable: 'runtime_unavailable',
  shutting_down: 'runtime_unavailable',
  internal: 'internal_error',
};

/** A core error in Flue's words; unknown failures never leak their message (§Error responses). */
export const fromCoreError = (code: GatewayErrorCode, details?: Record<string, unknown>): FlueError => {
  const type = CORE_ERRORS[code];
  if (type === 'rate_limited')
    return new FlueError(type, 'too many queued messages, retry later', '', undefined, {
      [HEADER.retryAfter]: String(details?.retryAfterSeconds ?? 1),
    });
  const message =
    type === 'internal_error'
      ? 'internal error'
      : type === 'runtime_unavailable'
        ? 'capsule or store unavailable, retry'
        : code;
  return new FlueError(
    type,
    message,
    '',
    undefined,
    type === 'runtime_unavailable' ? { [HEADER.retryAfter]: '1' } : {},
  );
};
