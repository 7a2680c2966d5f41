/** The Flue surface (https://nightly.flueframework.com/docs/reference/streaming-protocol/) as Hono routes with full paths under `/flue/`. */
import type { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { flueMalformedPath } from './malformed-path.js';
import { flueRateLimited } from './rate-limited.js';
import { createRoutes } from './routes.js';

export const createFlueRoutes = (deps: AdapterDeps): Hono => createRoutes(deps);

export const flueSurface = (deps: AdapterDeps): Surface => ({
  name: 'flue',
  prefix: '/flue/',
  capsulePath: /^\/flue\/([^/]+)/,
  submits: true,
  routes: createFlueRoutes(deps),
  malformedPath: flueMalformedPath,
  rateLimited: flueRateLimited,
});
