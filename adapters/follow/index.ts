/**
 * The follow surface: `GET /v1/follow` holds many streams of every other surface over one
 * connection (SSE or long-poll), each from its own cursor. The streams come from the other surfaces'
 * `follow` sources, handed over by the assembly (src/surfaces.ts): this folder knows none of them.
 */
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { FollowSource, Surface } from '../../src/http/surface.js';
import { createFollowRoutes, FOLLOW_PATH } from './routes.js';

export const followSurface = (deps: AdapterDeps, sources: readonly FollowSource[]): Surface => ({
  name: 'follow',
  prefix: FOLLOW_PATH,
  routes: createFollowRoutes(deps, sources),
  // One connection, many streams: it counts once against the per-key stream caps.
  capped: true,
});
