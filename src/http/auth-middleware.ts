/**
 * Resolves the caller once per request into a `Principal` on the Hono context (read with
 * `principalOf(c)` from src/auth/principal.ts). It never refuses a request itself: each route asks
 * `may(...)` and answers in its own grammar. Tickets (`?ticket=`) count only on GET streams and
 * long-polls, where browsers' EventSource cannot send a header.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../auth/authenticator.js';
import { setPrincipal } from '../auth/principal.js';

/** GET routes where `?ticket=` is accepted: live streams and long-polls of every surface. */
const TICKET_ROUTES: RegExp[] = [
  /^\/murmur\/[^/]+\/(events|poll|records)\/?$/,
  // BeeOS: the task and conversation event streams (their JSON reads take the Bearer header).
  /^\/api\/v1\/agents\/[^/]+\/(tasks|conversations)\/[^/]+\/events\/?$/,
  /^\/flue\/[^/]+\/[^/]+\/?$/,
  // Durable Streams (capsule and general): their live reads.
  /^\/v1\/stream\/.+$/,
  // Many streams over one connection: always a live read.
  /^\/v1\/follow\/?$/,
];

const ticketAllowed = (c: Context): boolean => {
  if (c.req.method !== 'GET') return false;
  const path = c.req.path;
  if (!TICKET_ROUTES.some((r) => r.test(path))) return false;
  // Flue and Durable Streams: only live reads (SSE or long-poll), not the one-shot catch-up read.
  if (path.startsWith('/flue/') || path.startsWith('/v1/stream/')) return c.req.query('live') !== undefined;
  return true;
};

/** The socket's address; the abuse-bounds room may replace this with a trust-proxy aware one. */
const socketIp = (c: Context): string =>
  (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket
    ?.remoteAddress ?? 'unknown';

export interface AuthMiddlewareOptions {
  authenticator: Authenticator;
  /** Client IP of a request (default: the socket's peer address). */
  clientIp?: (c: Context) => string;
}

export const createAuthMiddleware = (options: AuthMiddlewareOptions): MiddlewareHandler => {
  const ipOf = options.clientIp ?? socketIp;
  return async (c, next) => {
    const ip = ipOf(c);
    const ticket = ticketAllowed(c) ? c.req.query('ticket') : undefined;
    const principal = await options.authenticator.resolve({
      authorization: c.req.header('authorization'),
      ticket,
      ip,
    });
    setPrincipal(c, principal);
    await next();
  };
};
