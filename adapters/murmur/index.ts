/** The native Murmur surface: the capsule's address, EventSource, and long-poll (poll.ts), mounted at '/'. */
import type { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { createRpcRoutes } from './routes.js';

/** Every route of the native Murmur surface, with full paths. */
export const createMurmurRoutes = (deps: AdapterDeps): Hono => {
  const app = createRpcRoutes(deps);
  return app;
};
