/**
 * Applies the abuse bounds (src/auth/limits.ts) to every request once the caller is known, and bounds
 * how long a request body may take to arrive. A refusal is a 429 with Retry-After in the grammar of
 * the surface the path belongs to (each adapter supplies its renderer); other paths answer the
 * ops/admin JSON. Open routes (health, dashboard, client module, CORS preflights) are never limited.
 */
import { constants, Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import type { MiddlewareHandler } from 'hono';
import type { AbuseLimits, RequestShape } from '../auth/limits.js';
import { principalOf } from '../auth/principal.js';
import { surfaceAt, type RateLimitedRenderer, type Surface } from './surface.js';

const OPEN_PATH = /^\/(healthz|readyz|dashboard(\/.*)?|client\/.*)?$/;

const opsRateLimited: RateLimitedRenderer = (c, retryAfterSeconds) =>
  c.json({ error: { code: 'rate_limited', message: 'too many requests, retry later' } }, 429, {
    'Retry-After': String(retryAfterSeconds),
  });

type NodeEnv = { incoming?: NodeJS.EventEmitter; outgoing?: NodeJS.EventEmitter } | undefined;

/**
 * What the bounds count of a request to `path` on `surface` (surfaceAt), or null for a request they
 * never limit. A route served before Hono (direct-routes.ts) is admitted by this same rule.
 */
export const admissionShape = (
  method: string,
  path: string,
  surface: Surface | undefined,
): RequestShape | null => {
  if (method === 'OPTIONS' || OPEN_PATH.test(path)) return null;
  const capsulePath = surface?.capsulePath?.test(path) ?? false;
  return {
    capsuleSurface: capsulePath || (surface?.capped ?? false),
    submission: capsulePath && (surface?.submits ?? false) && method === 'POST',
  };
};

export const createLimitsMiddleware = (
  limits: AbuseLimits,
  surfaces: readonly Surface[],
): MiddlewareHandler => {
  return async (c, next) => {
    const path = c.req.path;
    const surface = surfaceAt(surfaces, path);
    const shape = admissionShape(c.req.method, path, surface);
    if (!shape) return next();
    const admission = await limits.admit(principalOf(c), shape);
    if (!admission.ok) return (surface?.rateLimited ?? opsRateLimited)(c, admission.retryAfterSeconds);
    const outgoing = (c.env as NodeEnv)?.outgoing;
    if (!outgoing) {
      // No socket (app.request in unit tests): the request ends with its handler.
      try {
        await next();
      } finally {
        admission.release();
      }
      return;
    }
    // Held until the socket response closes: a stream holds its slot for its whole life.
    outgoing.on('close', admission.release);
    await next();
  };
};

/**
 * Whether the request carries no body at all (HTTP/1.1: no Content-Length above 0 and no
 * Transfer-Encoding; HTTP/2: the stream ended with its headers). Its IncomingMessage is not yet
 * `complete` when the middleware runs (Node marks it once the parser returns), and its 'end' is
 * emitted only if someone reads it, so a timer armed for it stayed, with its listeners, for the
 * life of every GET stream: a Timeout and three closures per idle follower.
 */
const bodiless = (incoming: NodeJS.EventEmitter): boolean => {
  if (incoming instanceof Http2ServerRequest) return incoming.stream.endAfterHeaders;
  const headers = (incoming as { headers?: Record<string, string | string[] | undefined> }).headers;
  if (!headers) return false;
  const length = headers['content-length'];
  return headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0);
};

type TimedIncoming = NodeJS.EventEmitter & { complete?: boolean; socket?: Socket };
type TimedOutgoing = NodeJS.EventEmitter & {
  headersSent?: boolean;
  writeHead?: (s: number, h: object) => void;
  end?: (b: string, cb: () => void) => void;
};

/**
 * Arm the body deadline of one request (createBodyTimeout), on Node's request and response: a route
 * served before Hono (direct-routes.ts) arms the same one.
 */
export const armBodyTimeout = (
  request: NodeJS.EventEmitter | undefined,
  response: NodeJS.EventEmitter | undefined,
  timeoutMs: number,
): void => {
  const incoming = request as TimedIncoming | undefined;
  const outgoing = response as TimedOutgoing | undefined;
  if (!incoming || incoming.complete !== false || !outgoing || bodiless(incoming)) return;
  const timer = setTimeout(() => {
    if (incoming.complete) return;
    // HTTP/2: the connection is shared by other streams; only this one is answered and reset.
    if (incoming instanceof Http2ServerRequest) {
      const res = outgoing as unknown as Http2ServerResponse;
      if (!res.headersSent) {
        res.writeHead(408, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ error: { code: 'request_timeout', message: 'request body took too long' } }),
        );
      }
      incoming.stream.close(constants.NGHTTP2_CANCEL);
      return;
    }
    const socket = incoming.socket;
    if (!outgoing.headersSent && outgoing.writeHead && outgoing.end) {
      outgoing.writeHead(408, { 'content-type': 'application/json', connection: 'close' });
      outgoing.end(
        JSON.stringify({ error: { code: 'request_timeout', message: 'request body took too long' } }),
        () => socket?.destroy(),
      );
    } else socket?.destroy();
  }, timeoutMs);
  timer.unref();
  outgoing.once('close', () => clearTimeout(timer));
  incoming.once('end', () => clearTimeout(timer));
};

/**
 * Cut a request whose body has not fully arrived `timeoutMs` after its headers (slow-loris on the
 * body). Only the receipt of the request is bounded: a request without a body is never timed, and a
 * POST stream starts after its body was read, so long-lived responses are never cut.
 */
export const createBodyTimeout = (timeoutMs: number): MiddlewareHandler => {
  return async (c, next) => {
    const env = c.env as NodeEnv;
    armBodyTimeout(env?.incoming, env?.outgoing, timeoutMs);
    await next();
  };
};
