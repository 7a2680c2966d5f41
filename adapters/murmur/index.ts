/** The native Murmur surface: the capsule's address, EventSource, and long-poll (poll.ts), mounted at '/'. */
import { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { createPollRoutes } from './poll.js';
import { createRpcRoutes } from './routes.js';

/** Every route of the native Murmur surface, with full paths. */
export const createMurmurRoutes = (deps: AdapterDeps): Hono => {
  const app = new Hono();
  app.route('/', createPollRoutes(deps));
  app.route('/', createRpcRoutes(deps));
  return app;
};
