/**
 * The BeeOS surface: `createBeeosRoutes(deps)` returns a Hono app with every route under
 * /api/v1/agents/{agent}/… (full paths), X-Request-Id on every answer, body limit and 404/405 in the
 * BeeOS error envelope. Everything else is in routes.ts and the modules it uses.
 */
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { ChannelRegistry } from './channels.js';
import { AGENTS_PREFIX, HEADER_REQUEST_ID } from './constants.js';
import { beeosFollow } from './follow.js';
import { BeeosError } from './errors.js';
import { errorResponse, requestIdOf } from './http-helpers.js';
import type { Env } from './http-helpers.js';
import { beeosMalformedPath } from './malformed-path.js';
import { beeosRateLimited } from './rate-limited.js';
import { registerBeeosRoutes } from './routes.js';
import type { BeeosRouteOptions } from './routes.js';

const KNOWN_PATH =
  /^\/api\/v1\/agents\/[^/]+\/(invoke|tasks|conversations)(\/[^/]+(\/(events|messages|cancel))?)?\/?$/;

/** The BeeOS routes (docs/surfaces/beeos.md). `options` exists for tests (shorter invoke timeout). */
export const createBeeosRoutes = (deps: AdapterDeps, options: BeeosRouteOptions = {}): Hono<Env> => {
  const app = new Hono<Env>();
  app.use(`${AGENTS_PREFIX}/*`, async (c, next) => {
    const rid = requestIdOf(c);
    c.set('requestId', rid);
    c.set('logger', deps.logger);
    await next();
    c.res.headers.set(HEADER_REQUEST_ID, rid);
  });
  const limit = bodyLimit({
    maxSize: deps.config.bodyLimitBytes,
    onError: (c) =>
      errorResponse(
        c as never,
        new BeeosError('payload_too_large', `request body exceeds ${deps.config.bodyLimitBytes} bytes`),
      ),
  });
  // GET and HEAD carry no body to bound. Asking for one (`c.req.raw.body`) makes @hono/node-server
  // build the full Web Request (URL, Headers, AbortController), which a long-lived event stream then
  // holds for its whole life: about 3 KB per idle BeeOS connection.
  app.use(`${AGENTS_PREFIX}/*`, (c, next) =>
    c.req.method === 'GET' || c.req.method === 'HEAD' ? next() : limit(c, next),
  );
  registerBeeosRoutes(app, deps, options);
  app.all(`${AGENTS_PREFIX}/*`, (c) =>
    errorResponse(
      c,
      KNOWN_PATH.test(c.req.path)
        ? new BeeosError('method_not_allowed', `method ${c.req.method} is not allowed here`)
        : new BeeosError('not_found', 'no such route'),
    ),
  );
  return app;
};

export const beeosSurface = (deps: AdapterDeps): Surface => {
  // The routes and the follow source know the same channels.
  const registry = new ChannelRegistry(deps.core);
  return {
    name: 'beeos',
    prefix: `${AGENTS_PREFIX}/`,
    capsulePath: /^\/api\/v1\/agents\/([^/]+)/,
    submits: true,
    routes: createBeeosRoutes(deps, { registry }),
    malformedPath: beeosMalformedPath,
    rateLimited: beeosRateLimited,
    follow: beeosFollow({ core: deps.core, registry }),
  };
};
