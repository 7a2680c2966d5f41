/**
 * Assembles the HTTP surface: CORS for configured origins, connection accounting, the operations
 * routes and every adapter's routes. Adapters own their paths and error grammar; this file owns only
 * what is shared by all of them.
 */
import { Hono, type Context } from 'hono';
import { cors } from 'hono/cors';
import { GatewayError } from '../errors.js';
import type { Logger } from 'pino';
import type { GatewayCore } from '../core/types.js';
import { createMetrics, type InternalStats, type MetricsRegistry } from './metrics.js';
import type { LatencyMetrics } from '../core/latency.js';
import { contextOf, endSpan, SpanKind, startSpan, tracingOn, withSpan } from '../tracing.js';
import { createOpsRoutes, type OpsDeps } from './ops-routes.js';
import { createStaticRoutes } from './static-routes.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { TicketAuthority } from '../auth/tickets.js';
import type { AuthPosture } from '../auth/secure-default.js';
import { createAuthMiddleware } from './auth-middleware.js';
import { createAuthRoutes, redactTicket } from './auth-routes.js';
import type { AbuseLimits } from '../auth/limits.js';
import { createBodyTimeout, createLimitsMiddleware } from './limits-middleware.js';
import { createMalformedPathGuard } from './malformed-path.js';
import { surfaceAt, type DirectAnswer, type Surface } from './surface.js';
import { countUnexpected } from './unexpected-errors.js';
import { closeAfterUnreadRefusal } from './refusal-connection.js';
import type { RequestOrigin } from '../auth/client-ip.js';
import { directRoutesFirst, type DirectListener } from './direct-routes.js';
import type { RequestListener } from './request-pacing.js';

/** Headers browsers must be allowed to read cross-origin (Flue and BeeOS coordination headers). */
const EXPOSED_HEADERS = [
  'Stream-Next-Offset',
  'Stream-Up-To-Date',
  'Stream-Cursor',
  'Location',
  'X-Request-Id',
  // The general Durable Streams (PROTOCOL.md §5): closure, expiry, producers, cache validation.
  'Stream-Closed',
  'Stream-TTL',
  'Stream-Expires-At',
  'Producer-Epoch',
  'Producer-Seq',
  'Producer-Expected-Seq',
  'Producer-Received-Seq',
  'ETag',
  // SSE of a binary stream: its data events are base64.
  'Stream-SSE-Data-Encoding',
];

/** Request headers of the general Durable Streams a browser may send cross-origin. */
const STREAM_REQUEST_HEADERS = [
  'If-None-Match',
  'Stream-TTL',
  'Stream-Expires-At',
  'Stream-Seq',
  'Stream-Closed',
  'Producer-Id',
  'Producer-Epoch',
  'Producer-Seq',
  // Forks (§4.2).
  'Stream-Forked-From',
  'Stream-Fork-Offset',
  'Stream-Fork-Sub-Offset',
];

/** Request headers a browser may send cross-origin (with CORS origins configured). */
const CORS_ALLOW_HEADERS = [
  'Authorization',
  'Content-Type',
  'Last-Event-ID',
  'Idempotency-Key',
  'traceparent',
  'tracestate',
  ...STREAM_REQUEST_HEADERS,
];
const CORS_ALLOW_METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS'];

/**
 * The CORS origin check: exact origins, `*` for any, and `scheme://host:*` for that host on any port
 * (the demo's loopback pages).
 */
const corsOriginCheck = (origins: readonly string[]): ((origin: string) => string | null) => {
  const exact = new Set(origins.filter((o) => !o.endsWith(':*')));
  const anyPort = origins.filter((o) => o.endsWith(':*')).map((o) => o.slice(0, -2));
  const portOf = (origin: string, host: string): boolean =>
    origin === host || (origin.startsWith(`${host}:`) && /^\d{1,5}$/.test(origin.slice(host.length + 1)));
  return (origin) => {
    if (exact.has('*')) return '*';
    return exact.has(origin) || anyPort.some((host) => portOf(origin, host)) ? origin : null;
  };
};

export interface HttpAppOptions {
  core: GatewayCore;
  logger: Logger;
  corsOrigins: string[];
  storeReady: () => Promise<boolean>;
  /** Hub and writer counters for /metrics. */
  internals?: () => InternalStats;
  /** Hand-off, first-frame and delivery-lag histograms for /metrics. */
  latency?: LatencyMetrics;
  /** Capsule ownership across replicas, for /capsules. */
  ownership?: OpsDeps['ownership'];
  /** Credentials → principal for every request; absent = every caller is open (unit tests). */
  auth?: {
    authenticator: Authenticator;
    tickets: TicketAuthority;
    posture: AuthPosture;
    /** Client IP of a request (trust proxy); default: the socket peer. */
    clientIp?: (c: Context) => string;
    /** The same from a Node request's origin, for the direct routes; absent with clientIp: none. */
    originIp?: (o: RequestOrigin) => string;
  };
  /** Abuse bounds (off when absent); the body receipt timeout. */
  limits?: AbuseLimits;
  bodyTimeoutMs?: number;
  /** Every surface: its routes, and its grammar where shared middleware answers for it. */
  surfaces: Surface[];
}

export interface HttpApp {
  app: Hono;
  /**
   * Node's listener for the app (`listener`: Hono's) behind the surfaces' direct routes
   * (direct-routes.ts): none when CORS origins are configured, or a client address is resolved
   * without `originIp`.
   */
  directFirst(listener: RequestListener): RequestListener | DirectListener;
  metrics: MetricsRegistry;
  /** Open downstream connections, per capsule then surface. */
  connections: () => Record<string, Record<string, number>>;
}

/** `/murmur/x/…` → ['murmur', 'x']: the surface and capsule a path addresses, if any. */
const capsuleOf = (surfaces: readonly Surface[], path: string): [string, string] | null => {
  const surface = surfaceAt(surfaces, path);
  const m = surface?.capsulePath?.exec(path);
  if (!surface || !m?.[1]) return null;
  // A malformed escape (`%E0`) names no capsule: the adapter answers it in its own grammar.
  try {
    return [surface.name, decodeURIComponent(m[1])];
  } catch {
    return null;
  }
};

export const createHttpApp = (options: HttpAppOptions): HttpApp => {
  const open = new Map<string, Map<string, number>>();
  const bump = (capsule: string, surface: string, delta: number): void => {
    const bySurface = open.get(capsule) ?? new Map<string, number>();
    bySurface.set(surface, (bySurface.get(surface) ?? 0) + delta);
    open.set(capsule, bySurface);
  };
  const connections = (): Record<string, Record<string, number>> =>
    Object.fromEntries([...open].map(([capsule, m]) => [capsule, Object.fromEntries(m)]));

  const metrics = createMetrics(options.core, connections, options.internals, options.latency);
  const app = new Hono();

  if (options.corsOrigins.length > 0) {
    const allowed = corsOriginCheck(options.corsOrigins);
    app.use(
      '*',
      cors({
        origin: allowed,
        allowHeaders: CORS_ALLOW_HEADERS,
        allowMethods: CORS_ALLOW_METHODS,
        exposeHeaders: EXPOSED_HEADERS,
        maxAge: 600,
      }),
    );
  } else {
    // No origin is allowed, so a preflight grants a browser nothing (no Allow-Origin); it is still
    // answered as one, naming the methods and headers the surfaces take, rather than 405.
    app.options('*', async (c, next) => {
      if (!c.req.header('access-control-request-method')) return next();
      return c.body(null, 204, {
        'access-control-allow-methods': CORS_ALLOW_METHODS.join(','),
        'access-control-allow-headers': CORS_ALLOW_HEADERS.join(','),
        vary: 'Origin',
      });
    });
  }

  // Before the routes: whatever refuses a request before its body arrived, the connection is not reused.
  app.use('*', closeAfterUnreadRefusal);
  // Every 503 (store out of reach, draining) says when to come back, whichever surface answered it:
  // a client retries (on another replica, behind a load balancer) instead of taking it as final.
  app.use('*', async (c, next) => {
    await next();
    if (c.res.status === 503 && !c.res.headers.has('retry-after')) {
      try {
        c.res.headers.set('Retry-After', '1');
      } catch {
        // An immutable Response (a passed-through fetch answer): left as it is.
      }
    }
  });

  // Bad input in the path itself, before credentials are read: no route can make sense of it.
  app.use('*', createMalformedPathGuard(options.surfaces));

  // From the headers' arrival: a body that never completes is cut (slow-loris), streams are not.
  if (options.bodyTimeoutMs) app.use('*', createBodyTimeout(options.bodyTimeoutMs));

  // After CORS (preflights are answered there, open) and before every route: who is calling.
  if (options.auth) {
    app.use(
      '*',
      createAuthMiddleware({ authenticator: options.auth.authenticator, clientIp: options.auth.clientIp }),
    );
  }

  // Once the caller is known: rate limits, open-request caps, submissions per owner.
  if (options.limits?.enabled) {
    app.use('*', createLimitsMiddleware(options.limits, options.surfaces));
  }

  // Count a downstream connection from request start until its socket response closes (streams too).
  app.use('*', async (c, next) => {
    const hit = capsuleOf(options.surfaces, c.req.path);
    const outgoing = (c.env as { outgoing?: NodeJS.EventEmitter } | undefined)?.outgoing;
    if (!hit || !outgoing || !options.core.hasCapsule(hit[1])) return next();
    const [surface, capsule] = hit;
    bump(capsule, surface, 1);
    metrics.connectionsOpened.inc({ surface });
    // 'close' fires once: `on` spares a `once` wrapper per connection.
    outgoing.on('close', () => bump(capsule, surface, -1));
    return next();
  });

  // A message a surface accepts starts (or continues, from the client's `traceparent`) its trace.
  app.use('*', async (c, next) => {
    if (!tracingOn() || c.req.method !== 'POST') return next();
    const hit = capsuleOf(options.surfaces, c.req.path);
    if (!hit) return next();
    const span = startSpan('murmur.request', {
      parent: contextOf(c.req.header('traceparent')),
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': 'POST',
        'url.path': c.req.path,
        'murmur.surface': hit[0],
        'murmur.capsule': hit[1],
      },
    });
    try {
      await withSpan(span, next);
      span?.setAttribute('http.response.status_code', c.res.status);
    } finally {
      endSpan(span);
    }
  });

  app.route(
    '/',
    createOpsRoutes({
      core: options.core,
      storeReady: options.storeReady,
      connections,
      metrics,
      ownership: options.ownership,
      authPosture: options.auth?.posture,
    }),
  );
  if (options.auth) app.route('/', createAuthRoutes(options.auth.tickets));
  // The browser client module and the dashboard (static files).
  app.route('/', createStaticRoutes());
  for (const surface of options.surfaces) app.route('/', surface.routes);

  app.notFound((c) =>
    c.json({ error: { code: 'not_found', message: `no route for ${c.req.method} ${c.req.path}` } }, 404),
  );
  /** A fault no route answered for, logged; `url` as sent (its ticket redacted in the log). */
  const failed = (err: unknown, path: string, url: string): DirectAnswer & { body: string } => {
    // A store out of reach is never a 500: the replica says it cannot serve this now.
    if (err instanceof GatewayError && err.code === 'store_unavailable') {
      options.logger.warn({ err: err.message, path }, 'store unavailable');
      return {
        status: 503,
        headers: { 'content-type': 'application/json', 'retry-after': '1' },
        body: JSON.stringify({ error: { code: 'store_unavailable', message: 'log store unavailable' } }),
      };
    }
    countUnexpected('request');
    options.logger.error({ err, path, url: redactTicket(url) }, 'unhandled error');
    return {
      status: 500,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ error: { code: 'internal', message: 'internal error' } }),
    };
  };
  app.onError((err, c) => {
    const answer = failed(err, c.req.path, c.req.url);
    return c.body(answer.body, answer.status as 500, answer.headers);
  });

  const auth = options.auth;
  // CORS answers every request with its headers; a client address resolved another way (a custom
  // clientIp) could not be resolved the same before Hono: both keep every request on Hono.
  const direct = options.corsOrigins.length === 0 && !(auth?.clientIp && !auth.originIp);
  const directFirst = (listener: RequestListener): RequestListener | DirectListener =>
    direct
      ? directRoutesFirst(
          {
            surfaces: options.surfaces,
            ...(auth
              ? {
                  auth: {
                    authenticator: auth.authenticator,
                    // The auth middleware's default: the socket's address as it is.
                    originIp: auth.originIp ?? ((o: RequestOrigin) => o.peer ?? 'unknown'),
                  },
                }
              : {}),
            ...(options.limits ? { limits: options.limits } : {}),
            ...(options.bodyTimeoutMs ? { bodyTimeoutMs: options.bodyTimeoutMs } : {}),
            // A direct route's target is a plain path (no query, so no ticket to redact).
            appFailed: (err, path) => failed(err, path, path),
          },
          listener,
        )
      : listener;

  return { app, directFirst, metrics, connections };
};
