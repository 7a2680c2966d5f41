/**
 * `POST /auth/tickets` and the ops-grammar scope guard. A ticket is minted only from a Bearer
 * credential (a ticket cannot mint tickets: tickets are only read on GET streams).
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { TicketAuthority } from '../auth/tickets.js';
import { may, principalOf, type Principal, type Scope } from '../auth/principal.js';

/** 401 when no valid credential was presented, 403 when it lacks the scope (ops `{error}` grammar). */
const opsRefusal = (c: Context, p: Principal, scope: Scope): Response | null => {
  if (may(p, scope)) return null;
  if (p.kind === 'anonymous') {
    const error = p.failure === 'missing' ? 'invalid_request' : 'invalid_token';
    return c.json(
      {
        error: { code: 'unauthorized', message: 'a valid credential is required (Authorization: Bearer …)' },
      },
      401,
      { 'WWW-Authenticate': `Bearer realm="murmur-gateway", error="${error}"` },
    );
  }
  return c.json({ error: { code: 'forbidden', message: `this credential lacks the "${scope}" scope` } }, 403);
};

export const requireScope =
  (scope: Scope): MiddlewareHandler =>
  async (c, next) => {
    const refused = opsRefusal(c, principalOf(c), scope);
    if (refused) return refused;
    await next();
  };

export const createAuthRoutes = (tickets: TicketAuthority): Hono => {
  const app = new Hono();
  app.post('/auth/tickets', async (c) => {
    const p = principalOf(c);
    if (p.kind !== 'key' && p.kind !== 'jwt' && p.kind !== 'open') {
      return c.json(
        { error: { code: 'unauthorized', message: 'a Bearer key or JWT is required to get a ticket' } },
        401,
        { 'WWW-Authenticate': 'Bearer realm="murmur-gateway"' },
      );
    }
    let issued: { ticket: string; expiresAt: number };
    try {
      issued = await tickets.issue(p);
    } catch {
      return c.json(
        { error: { code: 'store_unavailable', message: 'the ticket signing key is unavailable' } },
        503,
        { 'Retry-After': '1' },
      );
    }
    const { ticket, expiresAt } = issued;
    // Never cached: a ticket is a credential.
    return c.json({ ticket, expires_at: new Date(expiresAt).toISOString() }, 200, {
      'Cache-Control': 'no-store',
    });
  });
  return app;
};

/** `ticket=…` replaced in a URL or query string before it is logged. */
export const redactTicket = (url: string): string => url.replace(/([?&]ticket=)[^&#]*/gi, '$1[redacted]');
