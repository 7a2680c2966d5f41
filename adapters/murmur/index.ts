/**
 * The native Murmur surface: the capsule's address, EventSource, the long-poll (poll.ts) and the same
 * records as an SSE stream (records.ts), mounted at '/'.
 */
import { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { murmurAccess } from './access.js';
import { murmurFollow } from './follow.js';
import { murmurMalformedPath } from './malformed-path.js';
import { murmurRateLimited } from './rate-limited.js';
import { createPollRoutes } from './poll.js';
import { createRecordsRoutes } from './records.js';
import { createRpcRoutes } from './routes.js';

/** Every route of the native Murmur surface, with full paths. */
const createMurmurRoutes = (deps: AdapterDeps): Hono => {
  const app = new Hono();
  app.use('/murmur/:capsule', murmurAccess);
  app.use('/murmur/:capsule/*', murmurAccess);
  app.route('/', createPollRoutes(deps));
  app.route('/', createRecordsRoutes(deps));
  app.route('/', createRpcRoutes(deps));
  return app;
};

export const murmurSurface = (deps: AdapterDeps): Surface => ({
  name: 'murmur',
  prefix: '/murmur/',
  capsulePath: /^\/murmur\/([^/]+)/,
  submits: true,
  routes: createMurmurRoutes(deps),
  malformedPath: murmurMalformedPath,
  rateLimited: murmurRateLimited,
  follow: murmurFollow(deps.core, deps.logger),
});
