/**
 * Who may use the native surface. Its streams and poll are capsule-wide (every owner's records), so
 * they need the operator scope `observe`; JSON-RPC forwarded to the capsule with the operator's door
 * token needs `control` (`stream/watch` over POST is a read: `observe`). A capsule outside the
 * credential's list is the same plain 404 as an unknown one. Errors are JSON-RPC objects with the
 * HTTP status (401/403), like the rest of errors.ts.
 */
import type { MiddlewareHandler } from 'hono';
import {
  bearerChallenge,
  may,
  principalOf,
  seesCapsule,
  type Principal,
  type Scope,
} from '../../src/auth/principal.js';
import { murmurError, rpcErrorResponse } from './errors.js';

/** The refusal for `principal` using `scope` on `capsule`, or null when allowed. */
export const murmurRefusal = (principal: Principal, scope: Scope, capsule: string): Response | null => {
  if (principal.kind === 'anonymous')
    return rpcErrorResponse(401, -32001, 'Unauthorized', { 'www-authenticate': bearerChallenge(principal) });
  if (!seesCapsule(principal, capsule)) {
    const nf = murmurError('capsule_not_found');
    return new Response(null, { status: nf.status, headers: { 'content-length': '0' } });
  }
  if (!may(principal, scope, capsule))
    return rpcErrorResponse(403, -32003, `Forbidden: needs the "${scope}" scope`);
  return null;
};

/** Before every native route: authenticated and the capsule visible; GET reads need `observe`. */
export const murmurAccess: MiddlewareHandler = async (c, next) => {
  const capsule = c.req.param('capsule') ?? '';
  const p = principalOf(c);
  const refused = murmurRefusal(p, 'observe', capsule);
  // A POST's scope depends on its JSON-RPC method: routes.ts checks it once the body is parsed;
  // here only the credential and the capsule's visibility.
  if (refused && (c.req.method !== 'POST' || refused.status !== 403)) return refused;
  await next();
};
