/** BeeOS's 429 (BeeOS's error reference: `rate_limited`), for the gateway's abuse bounds. */
import type { Context } from 'hono';
import { HEADER_REQUEST_ID } from './constants.js';
import { BeeosError, errorBody } from './errors.js';
import { requestIdOf } from './http-helpers.js';

export const beeosRateLimited = (c: Context, retryAfterSeconds: number): Response => {
  const rid = requestIdOf(c);
  const err = new BeeosError('rate_limited', 'too many requests, retry after the Retry-After delay');
  return c.json(errorBody(err, rid), 429, {
    [HEADER_REQUEST_ID]: rid,
    'Retry-After': String(retryAfterSeconds),
  });
};
