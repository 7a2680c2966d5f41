/** The Durable Streams surface (PROTOCOL.md of durable-streams/durable-streams), mounted at '/'. */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { createCapsuleStreamRoutes } from './capsule-stream.js';
import { durableStreamsFollow } from './follow.js';
import { createGeneralStreams, type GeneralStreams } from './general-streams.js';
import { createSubscriptionRoutes } from './subscriptions.js';
import { streamProblem, streamsRateLimited } from './stream-errors.js';
import { NOT_UTF8, rawPathRefusal, rawRequestPath } from './stream-path.js';

/**
 * Before any route of the surface: the path as the client sent it names one stream (stream-path.ts).
 * The routes see the path after the URL parser resolved dot segments, too late to tell.
 */
const onePathOneStream: MiddlewareHandler = async (c, next) => {
  const refusal = rawPathRefusal(rawRequestPath(c));
  if (refusal) return streamProblem(c, refusal.code, refusal.message);
  await next();
};

/** The surface's 400 for a path segment that does not percent-decode (src/http/malformed-path.ts). */
const streamsMalformedPath = (c: Context): Response => streamProblem(c, NOT_UTF8.code, NOT_UTF8.message);

/**
 * The read-only capsule streams first, then the subscriptions' `__ds/` routes: every other
 * `/v1/stream/*` path is a general stream.
 */
const createDurableStreamsRoutes = (deps: AdapterDeps, general: GeneralStreams): Hono =>
  new Hono()
    .use('/v1/stream', onePathOneStream)
    .use('/v1/stream/*', onePathOneStream)
    .route('/', createCapsuleStreamRoutes(deps))
    .route('/', createSubscriptionRoutes(deps))
    .route('/', general.routes);

/**
 * Every `/v1/stream/*` read may stay open (long-poll, SSE): all count against the stream caps. An
 * append to a general stream is served before Hono (general-streams.ts `direct`).
 */
export const durableStreamsSurface = (deps: AdapterDeps): Surface => {
  const general = createGeneralStreams(deps);
  return {
    name: 'durable-streams',
    prefix: '/v1/stream/',
    capsulePath: /^\/v1\/stream\/murmur\/([^/]+)/,
    capped: true,
    routes: createDurableStreamsRoutes(deps, general),
    ...(general.direct ? { direct: general.direct } : {}),
    malformedPath: streamsMalformedPath,
    rateLimited: streamsRateLimited,
    // General streams can be followed on `GET /v1/follow` (`ds:{path}`) when they are served at all.
    ...(deps.config.durableStreams?.writable && deps.streams
      ? { follow: durableStreamsFollow(deps.streams) }
      : {}),
  };
};
