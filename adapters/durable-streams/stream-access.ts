/**
 * Who may use the general streams at all: writes (PUT, POST, DELETE) need `write`; reads (GET,
 * HEAD) need `write` or `observe`. General streams belong to no capsule, so a key's capsule list
 * does not apply; which streams a caller reaches is its owner's and its grants' (stream-owner.ts).
 * Refusals in this surface's grammar (stream-errors.ts). The rule is `mayUseStreams`, which
 * `GET /v1/follow` (follow.ts) asks too.
 */
import type { Context } from 'hono';
import { may, principalOf, type Principal } from '../../src/auth/principal.js';
import { streamError, unauthorizedHeaders, type StreamError } from './stream-errors.js';

/** Whether a known caller may read (`reading`) or write the general streams. */
export const mayUseStreams = (p: Principal, reading: boolean): boolean =>
  may(p, 'write') || (reading && may(p, 'observe'));

/** The refusal of a `method` request by `p`, or null when the caller may make it. */
export const streamAccessError = (p: Principal, method: string): StreamError | null => {
  if (p.kind === 'anonymous')
    return streamError('unauthorized', 'credentials required', unauthorizedHeaders(p));
  const reading = method === 'GET' || method === 'HEAD';
  if (mayUseStreams(p, reading)) return null;
  return streamError(
    'forbidden',
    reading ? 'needs the "write" or "observe" scope' : 'needs the "write" scope',
  );
};

export const streamRefusal = (c: Context): Response | null => {
  const refused = streamAccessError(principalOf(c), c.req.method);
  return refused && c.body(refused.body, refused.status, refused.headers);
};
