/**
 * Flue's 429 for the gateway's abuse bounds: the error envelope with the fixed headers and
 * Retry-After, which the SDK honours before retrying (@flue/sdk retries a 429).
 */
import { HEADER } from './constants.js';
import { errorResponse, FlueError } from './errors.js';

export const flueRateLimited = (_c: unknown, retryAfterSeconds: number): Response =>
  errorResponse(
    new FlueError('rate_limited', 'too many requests, retry later', '', undefined, {
      [HEADER.retryAfter]: String(retryAfterSeconds),
    }),
  );
