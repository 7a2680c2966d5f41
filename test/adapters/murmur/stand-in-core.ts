/**
 * A GatewayCore whose read side is a real Hub over one capsule; everything else throws. For route
 * tests (long-poll, records) that exercise reads only.
 */
import { Hono } from 'hono';
import { pino } from 'pino';
import { configSchema } from '../../../src/config/schema.js';
import type { GatewayCore } from '../../../src/core/types.js';
import { adapterConfigOf } from '../../../src/gateway.js';
import type { AdapterConfig, AdapterDeps } from '../../../src/http/adapter-deps.js';
import { Hub as HubImpl, type Hub } from '../../../src/hub/hub.js';
import { MemoryStore } from '../../../src/log/memory-store.js';
import type { RetentionPolicy } from '../../../src/log/store.js';

export const standInCore = (hub: Hub, shutdown: AbortSignal, capsule: string): GatewayCore => {
  const unused = (): never => {
    throw new Error('not used by a read-only route');
  };
  return {
    capsuleIds: () => [capsule],
    hasCapsule: (id) => id === capsule,
    conversationMode: () => 'stateless',
    releaseLine: () => 'spec',
    position: (c) => hub.position(c),
    cursorStatus: (c, after) => hub.cursorStatus(c, after),
    read: (c, after, limit) => hub.read(c, after, limit),
    readContext: (c, context, after, limit) => hub.readContext(c, context, after, limit),
    contextFirst: (c, context) => hub.contextFirst(c, context),
    waitAfter: (c, after, limit, timeoutMs, signal) => hub.waitAfter(c, after, limit, timeoutMs, signal),
    subscribe: (c, options) => hub.subscribe(c, options),
    submit: unused,
    cancel: unused,
    withdrawContext: unused,
    withdrawSubmission: unused,
    forwardRpc: unused,
    append: unused,
    status: unused,
    statuses: unused,
    claimOnce: unused,
    shutdownSignal: shutdown,
  };
};

/**
 * Read-only routes from `routes` over a fresh MemoryStore and Hub, with the user's default config
 * (plus `config`); `close` ends the hub and store.
 */
export const standInRoutes = (
  capsule: string,
  routes: (deps: AdapterDeps) => Hono,
  options: { retention?: RetentionPolicy; config?: Partial<AdapterConfig> } = {},
): { app: Hono; hub: Hub; store: MemoryStore; shutdown: AbortController; close(): Promise<void> } => {
  const store = new MemoryStore(options.retention);
  const hub = new HubImpl(store, { dissolveMs: 10 });
  const shutdown = new AbortController();
  const config: AdapterConfig = { ...adapterConfigOf(configSchema.parse({})), ...options.config };
  const app = new Hono();
  app.route(
    '/',
    routes({ core: standInCore(hub, shutdown.signal, capsule), config, logger: pino({ level: 'silent' }) }),
  );
  const close = async () => {
    shutdown.abort();
    await hub.close();
    await store.close();
  };
  return { app, hub, store, shutdown, close };
};
