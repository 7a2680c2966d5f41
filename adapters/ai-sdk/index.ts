/**
 * The AI SDK surface (`useChat` / `DefaultChatTransport`, unchanged) as Hono routes with full paths
 * under `/ai-sdk/`. Its answers outside a stream are in the ops grammar (errors.ts), so the shared
 * middleware's defaults are its own.
 */
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Surface } from '../../src/http/surface.js';
import { createRoutes, PREFIX } from './routes.js';

export const aiSdkSurface = (deps: AdapterDeps): Surface => ({
  name: 'ai-sdk',
  prefix: PREFIX,
  capsulePath: /^\/ai-sdk\/([^/]+)/,
  submits: true,
  routes: createRoutes(deps),
});
