/**
 * Errors the core hands to adapters. Each adapter maps `code` to its own protocol's grammar in one
 * table; nothing branches on message text.
 */
export type GatewayErrorCode =
  | 'capsule_not_found'
  | 'cursor_gone' // older than retention
  | 'cursor_ahead' // beyond the head, or from another epoch
  | 'bad_request'
  | 'payload_too_large'
  | 'upstream_unreachable'
  | 'upstream_busy'
  | 'queue_full' // the capsule's (or the owner's) submission queue is at its bound: details.retryAfterSeconds
  | 'upstream_invalid'
  | 'upstream_method_not_found'
  | 'upstream_timeout'
  | 'store_unavailable'
  | 'shutting_down'
  | 'internal';

export class GatewayError extends Error {
  constructor(
    readonly code: GatewayErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

/**
 * Whether `err` says this replica is cut from its store (`details.unreachable`, the hub's answer
 * while store-health.ts finds the store out of reach), not one failed call: a live reader is ended
 * with its surface's retry signal so it resumes on another replica, rather than retried here.
 */
export const storeUnreachable = (err: unknown): boolean =>
  err instanceof GatewayError && err.code === 'store_unavailable' && err.details?.unreachable === true;
