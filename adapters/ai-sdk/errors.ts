/**
 * The AI SDK has no error grammar of its own: its transport turns any non-2xx answer into an
 * `APICallError` carrying the body text. So this surface answers in the gateway's ops grammar,
 * `{"error": {"code", "message"}}`, with a status the client's `statusCode` can branch on.
 */
import type { GatewayErrorCode } from '../../src/errors.js';

export type AiSdkErrorCode =
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'invalid_json'
  | 'invalid_request'
  | 'no_user_message'
  | 'message_exists'
  | 'unsupported_media_type'
  | 'payload_too_large'
  | 'method_not_allowed'
  | 'rate_limited'
  | 'unavailable'
  | 'internal_error';

const STATUS: Record<AiSdkErrorCode, number> = {
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  invalid_json: 400,
  invalid_request: 400,
  no_user_message: 400,
  message_exists: 409,
  unsupported_media_type: 415,
  payload_too_large: 413,
  method_not_allowed: 405,
  rate_limited: 429,
  unavailable: 503,
  internal_error: 500,
};

export class AiSdkError extends Error {
  constructor(
    readonly code: AiSdkErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AiSdkError';
  }
}

export const errorResponse = (e: AiSdkError): Response =>
  new Response(JSON.stringify({ error: { code: e.code, message: e.message } }), {
    status: STATUS[e.code],
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...e.headers },
  });

/** A core error in this surface's words; internal failures never leak their message. */
export const fromCoreError = (code: GatewayErrorCode, details?: Record<string, unknown>): AiSdkError => {
  switch (code) {
    case 'queue_full':
      return new AiSdkError('rate_limited', 'too many queued messages, retry later', {
        'retry-after': String(details?.retryAfterSeconds ?? 1),
      });
    case 'capsule_not_found':
      return new AiSdkError('not_found', 'unknown capsule');
    case 'bad_request':
      return new AiSdkError('invalid_request', 'bad request');
    case 'payload_too_large':
      return new AiSdkError('payload_too_large', 'request body too large');
    case 'upstream_unreachable':
    case 'upstream_busy':
    case 'upstream_timeout':
    case 'store_unavailable':
    case 'shutting_down':
    case 'cursor_gone':
    case 'cursor_ahead':
      return new AiSdkError('unavailable', 'capsule or store unavailable, retry', { 'retry-after': '1' });
    default:
      return new AiSdkError('internal_error', 'internal error');
  }
};
