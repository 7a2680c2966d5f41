/**
 * The BeeOS error envelope: one code → HTTP status and error `type` table (BeeOS's error reference),
 * and the mapping of core GatewayError codes into it. Routes throw BeeosError; index.ts answers it.
 */
import type { GatewayErrorCode } from '../../src/errors.js';
import { GatewayError } from '../../src/errors.js';

export type BeeosErrorCode =
  | 'invalid_json'
  | 'invalid_body'
  | 'invalid_param'
  | 'missing_param'
  | 'missing_token'
  | 'invalid_token'
  | 'forbidden'
  | 'agent_not_found'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'payload_too_large'
  | 'rate_limited'
  | 'agent_service_unavailable'
  | 'service_timeout'
  | 'internal_error';

export const ERROR_TABLE: Record<BeeosErrorCode, { status: number; type: string }> = {
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_body: { status: 400, type: 'invalid_request_error' },
  invalid_param: { status: 400, type: 'invalid_request_error' },
  missing_param: { status: 400, type: 'invalid_request_error' },
  missing_token: { status: 401, type: 'authentication_error' },
  invalid_token: { status: 401, type: 'authentication_error' },
  forbidden: { status: 403, type: 'permission_error' },
  agent_not_found: { status: 404, type: 'not_found_error' },
  not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  conflict: { status: 409, type: 'conflict_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  agent_service_unavailable: { status: 503, type: 'service_unavailable_error' },
  service_timeout: { status: 504, type: 'timeout_error' },
  internal_error: { status: 500, type: 'api_error' },
};

export class BeeosError extends Error {
  constructor(
    readonly code: BeeosErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'BeeosError';
  }
}

/**
 * Core code → BeeOS code and the fixed public message. A GatewayError's own message is built from
 * Redis, socket or capsule errors (`redis: Command timed out`, internal addresses): it goes to the
 * log only, never into a response.
 */
const FROM_CORE: Partial<Record<GatewayErrorCode, [BeeosErrorCode, string]>> = {
  capsule_not_found: ['agent_not_found', 'agent not found'],
  bad_request: ['invalid_body', 'invalid request'],
  payload_too_large: ['payload_too_large', 'request body too large'],
  upstream_unreachable: ['agent_service_unavailable', 'agent service is unavailable'],
  upstream_busy: ['conflict', 'agent is busy and refused the message'],
  queue_full: ['rate_limited', 'too many queued messages, retry after the Retry-After delay'],
  upstream_method_not_found: ['conflict', 'agent does not accept tasks'],
  upstream_timeout: ['service_timeout', 'agent did not answer in time'],
  store_unavailable: ['agent_service_unavailable', 'log store unavailable, retry later'],
  shutting_down: ['agent_service_unavailable', 'gateway is shutting down'],
};

/** Any thrown value → a BeeosError; core and unknown errors never carry their own message out. */
export const toBeeosError = (err: unknown): BeeosError => {
  if (err instanceof BeeosError) return err;
  if (err instanceof GatewayError) {
    const mapped = FROM_CORE[err.code];
    if (mapped) return new BeeosError(mapped[0], mapped[1]);
  }
  return new BeeosError('internal_error', 'internal error');
};

/** The error envelope body (BeeOS's error reference). */
export const errorBody = (err: BeeosError, requestId: string) => ({
  success: false as const,
  error: { type: ERROR_TABLE[err.code].type, code: err.code, message: err.message, request_id: requestId },
});
