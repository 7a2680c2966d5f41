/**
 * Every surface the gateway serves, one line each: a surface is its folder under `adapters/` and
 * its entry here. Assembly, limits, the malformed-path guard and connection accounting read this
 * list; nothing else names a surface.
 */
import { a2aSurface } from '../adapters/a2a/index.js';
import { aiSdkSurface } from '../adapters/ai-sdk/index.js';
import { beeosSurface } from '../adapters/beeos/index.js';
import { durableStreamsSurface } from '../adapters/durable-streams/index.js';
import { flueSurface } from '../adapters/flue/index.js';
import { followSurface } from '../adapters/follow/index.js';
import { murmurSurface } from '../adapters/murmur/index.js';
import type { AdapterDeps } from './http/adapter-deps.js';
import type { Surface } from './http/surface.js';

export const createSurfaces = (deps: AdapterDeps): Surface[] => {
  const surfaces = [
    murmurSurface(deps),
    beeosSurface(deps),
    flueSurface(deps),
    durableStreamsSurface(deps),
    aiSdkSurface(deps),
    a2aSurface(deps),
  ];
  // `GET /v1/follow` holds the streams of every surface that offers some.
  const sources = surfaces.flatMap((s) => (s.follow ? [s.follow] : []));
  return [...surfaces, followSurface(deps, sources)];
};
