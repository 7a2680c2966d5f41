/**
 * Applies the abuse bounds (src/auth/limits.ts) to every request once the caller is known, and bounds
 * how long a request body may take to arrive. A refusal is a 429 with Retry-After in the grammar of
 * the surface the path belongs to (each adapter supplies its renderer); other paths answer the
 * ops/admin JSON. Open routes (health, dashboard, client module, CORS preflights) are never limited.
 */
import type { Socket } from 'node:net';
import type { Context, MiddlewareHandler } from 'hono';
import type { AbuseLimits } from '../auth/limits.js';
import { principalOf } from '../auth/principal.js';

/** A surface's 429: `retryAfterSeconds` goes in Retry-After; the body is the surface's own. */
export type RateLimitedRenderer = (c: Context, retryAfterSeconds: number) => Response;

export interface SurfaceRejection {
  /** Path prefix of the surface, e.g. `/murmur/`. */
  prefix: string;
  render: RateLimitedRenderer;
}

const OPEN_PATH = /^\/(healthz|readyz|dashboard(\/.*)?|client\/.*)$/;
const CAPSULE_SURFACE = /^\/(murmur|flue)\/[^/]+|^\/api\/v1\/agents\/[^/]+/;
/**
 * Durable Streams, the capsule streams (`/v1/stream/murmur/{c}`) and the general ones: their
 * long-polls and SSE reads stay open like the capsule surfaces', so they count against the same
 * open-request caps (a POST there is an append, not a submission).
 */
const STREAM_SURFACE = /^\/v1\/stream\/[^/]/;

const opsRateLimited: RateLimitedRenderer = (c, retryAfterSeconds) =>
  c.json({ error: { code: 'rate_limited', message: 'too many requests, retry later' } }, 429, {
    'Retry-After': String(retryAfterSeconds),
  });

type NodeEnv = { incoming?: NodeJS.EventEmitter; outgoing?: NodeJS.EventEmitter } | undefined;

export const createLimitsMiddleware = (
  limits: AbuseLimits,
  surfaces: SurfaceRejection[],
): MiddlewareHandler => {
  const renderFor = (path: string): RateLimitedRenderer =>
    surfaces.find((s) => path.startsWith(s.prefix))?.render ?? opsRateLimited;
  return async (c, next) => {
    const path = c.req.path;
    if (c.req.method === 'OPTIONS' || OPEN_PATH.test(path)) return next();
    const capsuleSurface = CAPSULE_SURFACE.test(path);
    const admission = await limits.admit(principalOf(c), {
      capsuleSurface: capsuleSurface || STREAM_SURFACE.test(path),
      submission: capsuleSurface && c.req.method === 'POST',
    });
    if (!admission.ok) return renderFor(path)(c, admission.retryAfterSeconds);
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
    outgoing.once('close', admission.release);
    await next();
  };
};

/**
 * Cut a request whose body has not fully arrived `timeoutMs` after its headers (slow-loris on the
 * body). Only the receipt of the request is bounded: a GET stream's request is complete at once, and
 * a POST stream starts after its body was read, so long-lived responses are never cut.
 */
export const createBodyTimeout = (timeoutMs: number): MiddlewareHandler => {
  return async (c, next) => {
    const env = c.env as NodeEnv;
    const incoming = env?.incoming as
      (NodeJS.EventEmitter & { complete?: boolean; socket?: Socket }) | undefined;
    const outgoing = env?.outgoing as
      | (NodeJS.EventEmitter & {
          headersSent?: boolean;
          writeHead?: (s: number, h: object) => void;
          end?: (b: string, cb: () => void) => void;
        })
      | undefined;
    if (!incoming || incoming.complete !== false || !outgoing) return next();
    const timer = setTimeout(() => {
      if (incoming.complete) return;
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
    await next();
  };
};
