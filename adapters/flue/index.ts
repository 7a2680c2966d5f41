/** The Flue surface (https://nightly.flueframework.com/docs/reference/streaming-protocol/) as Hono routes with full paths under `/flue/`. */
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { flueFollow } from './follow.js';
import { flueMalformedPath } from './malformed-path.js';
import { flueRateLimited } from './rate-limited.js';
import { createRoutes, flueShared } from './routes.js';

export const flueSurface = (deps: AdapterDeps): Surface => {
  // The routes and the follow source see the same conversations through the same index and cache.
  const shared = flueShared(deps);
  return {
    name: 'flue',
    prefix: '/flue/',
    capsulePath: /^\/flue\/([^/]+)/,
    submits: true,
    routes: createRoutes(deps, shared),
    malformedPath: flueMalformedPath,
    rateLimited: flueRateLimited,
    follow: flueFollow({ core: deps.core, ...shared }),
  };
};
