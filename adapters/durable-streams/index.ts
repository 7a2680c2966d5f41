/** The Durable Streams surface (PROTOCOL.md of durable-streams/durable-streams), mounted at '/'. */
import { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { createCapsuleStreamRoutes } from './capsule-stream.js';
import { durableStreamsFollow } from './follow.js';
import { createGeneralStreamRoutes } from './general-streams.js';
import { streamMalformedPath, streamRateLimited } from './stream-errors.js';

/** The read-only capsule streams first: every other `/v1/stream/*` path is a general stream. */
export const createDurableStreamsRoutes = (deps: AdapterDeps): Hono =>
  new Hono().route('/', createCapsuleStreamRoutes(deps)).route('/', createGeneralStreamRoutes(deps));

export const durableStreamsSurface = (deps: AdapterDeps): Surface => ({
  name: 'durable-streams',
  prefix: '/v1/stream/',
  capsulePath: /^\/v1\/stream\/murmur\/([^/]+)/,
  routes: createDurableStreamsRoutes(deps),
  malformedPath: streamMalformedPath,
  rateLimited: streamRateLimited,
  // General streams can be followed on `GET /v1/follow` (`ds:{path}`) when they are served at all.
  ...(deps.config.durableStreams?.writable && deps.streams
    ? { follow: durableStreamsFollow(deps.streams) }
    : {}),
});
