/** The A2A surface (A2A 1.0 and 0.3 JSON-RPC, notes a2a-and-webhooks.md) under `/a2a/`. */
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { A2aError, CODE, errorResponse } from './errors.js';
import { createRoutes } from './routes.js';

export const a2aSurface = (deps: AdapterDeps): Surface => ({
  name: 'a2a',
  prefix: '/a2a/',
  capsulePath: /^\/a2a\/([^/]+)/,
  submits: true,
  routes: createRoutes(deps),
  malformedPath: () =>
    errorResponse(
      null,
      new A2aError(CODE.invalidRequest, 'malformed path: a segment does not percent-decode', 400),
    ),
  rateLimited: (_c, retryAfterSeconds) =>
    errorResponse(
      null,
      new A2aError(
        CODE.server,
        'too many requests',
        429,
        { 'retry-after': String(retryAfterSeconds) },
        {
          retryAfterSeconds,
        },
      ),
    ),
});
