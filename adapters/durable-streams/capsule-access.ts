/**
 * Who may read a capsule stream: the operator scope `observe` (a capsule's log holds every owner's
 * records). The principal comes from src/auth through the auth middleware, which also takes a
 * `?ticket=` on live reads for EventSource; a capsule outside the credential's list is the same
 * 404 as an unknown one, so its existence does not leak.
 */
import type { MiddlewareHandler } from 'hono';
import { may, principalOf, seesCapsule } from '../../src/auth/principal.js';
import { problem, STREAM_MESSAGES } from './capsule-errors.js';
import { unauthorizedHeaders } from './stream-errors.js';

export const capsuleStreamAccess: MiddlewareHandler = async (c, next) => {
  const capsule = c.req.param('capsule') ?? '';
  const p = principalOf(c);
  if (p.kind === 'anonymous') return problem(401, STREAM_MESSAGES.unauthorized, unauthorizedHeaders(p));
  if (!seesCapsule(p, capsule)) return problem(404, STREAM_MESSAGES.notFound);
  if (!may(p, 'observe', capsule)) return problem(403, STREAM_MESSAGES.forbidden);
  await next();
};
