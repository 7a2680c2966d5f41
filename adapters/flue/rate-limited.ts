/**
 * Flue's 429 for the gateway's abuse bounds: the error envelope with the fixed headers and
 * Retry-After, which the SDK honours before retrying (@flue/sdk retries a 429).
 */
import { FIXED_HEADERS, HEADER } from './constants.js';

export const flueRateLimited = (_c: unknown, retryAfterSeconds: number): Response =>
  new Response(
    JSON.stringify({
      error: { type: 'rate_limited', message: 'too many requests, retry later', details: '' },
    }),
    {
      status: 429,
      headers: {
        [HEADER.contentType]: 'application/json',
        ...FIXED_HEADERS,
        [HEADER.retryAfter]: String(retryAfterSeconds),
      },
    },
  );
