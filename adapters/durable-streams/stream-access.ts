/**
 * Who may use the general streams at all: writes (PUT, POST, DELETE) need `write`; reads (GET,
 * HEAD) need `write` or `observe`. General streams belong to no capsule, so a key's capsule list
 * does not apply; which streams a caller reaches is its owner's and its grants' (stream-owner.ts).
 * Refusals in this surface's grammar (stream-errors.ts).
 */
import type { Context } from 'hono';
import { may, principalOf } from '../../src/auth/principal.js';
import { streamProblem } from './stream-errors.js';

export const streamRefusal = (c: Context): Response | null => {
  const p = principalOf(c);
  if (p.kind === 'anonymous') {
    const error = p.failure === 'missing' ? '' : ', error="invalid_token"';
    return streamProblem(c, 'unauthorized', 'credentials required', {
      'www-authenticate': `Bearer realm="murmur-gateway"${error}`,
    });
  }
  const reading = c.req.method === 'GET' || c.req.method === 'HEAD';
  if (may(p, 'write') || (reading && may(p, 'observe'))) return null;
  return streamProblem(
    c,
    'forbidden',
    reading ? 'needs the "write" or "observe" scope' : 'needs the "write" scope',
  );
};
