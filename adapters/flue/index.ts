/** The Flue surface (https://nightly.flueframework.com/docs/reference/streaming-protocol/) as Hono routes with full paths under `/flue/`. */
import type { Hono } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { createRoutes } from './routes.js';

export const createFlueRoutes = (deps: AdapterDeps): Hono => createRoutes(deps);
