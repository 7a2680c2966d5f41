/**
 * A gateway with only the Flue surface, assembled from the real pieces (store → writer → upstream →
 * hub → core → routes → HTTP); same shape as test/support/gateway.ts's startTestGateway.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { createFlueRoutes } from '../../../adapters/flue/index.js';
import { GatewayCoreImpl, type UpstreamPort } from '../../../src/core/gateway-core.js';
import type { GatewayCore } from '../../../src/core/types.js';
import type { AdapterConfig } from '../../../src/http/adapter-deps.js';
import { Hub } from '../../../src/hub/hub.js';
import { LogWriter } from '../../../src/log/log-writer.js';
import { MemoryStore } from '../../../src/log/memory-store.js';
import { RedisStore } from '../../../src/log/redis-store.js';
import type { LogStore, RetentionPolicy } from '../../../src/log/store.js';
import { CapsuleUpstream } from '../../../src/upstream/capsule-upstream.js';

export interface FlueGateway {
  baseUrl: string;
  core: GatewayCore;
  store: LogStore;
  writer: LogWriter;
  close(): Promise<void>;
}

export interface FlueGatewayOptions {
  capsules: Record<string, string>;
  redisUrl?: string;
  config?: Partial<AdapterConfig> & { retention?: RetentionPolicy };
}

export const startFlueGateway = async (opts: FlueGatewayOptions): Promise<FlueGateway> => {
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'silent' });
  const retention = opts.config?.retention ?? { maxRecords: 0, maxAgeMs: 0 };
  const store: LogStore = opts.redisUrl
    ? new RedisStore(opts.redisUrl, { retention, keyPrefix: `ft-${randomUUID().slice(0, 8)}`, logger })
    : new MemoryStore(retention);
  const writer = new LogWriter(store, { logger });
  const hub = new Hub(store, { logger });
  const upstreams = new Map<string, UpstreamPort>();
  const started: CapsuleUpstream[] = [];
  for (const [id, url] of Object.entries(opts.capsules)) {
    const upstream = new CapsuleUpstream({
      capsule: id,
      url,
      writer,
      store,
      logger,
      backoffBaseMs: 20,
      backoffCapMs: 200,
    });
    upstreams.set(id, upstream);
    started.push(upstream);
  }
  const shutdown = new AbortController();
  const core = new GatewayCoreImpl({ hub, writer, upstreams, shutdownSignal: shutdown.signal });
  const config: AdapterConfig = {
    heartbeatMs: 15_000,
    longPollMaxMs: 30_000,
    idleControlMs: 30_000,
    bodyLimitBytes: 1 << 20,
    publicUrl: null,
    beeosKeys: [],
    maxQueuedRecords: 10_000,
    ...opts.config,
  };
  const app = new Hono();
  app.route('/', createFlueRoutes({ core, config, logger }));
  for (const u of started) u.start();
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    core,
    store,
    writer,
    close: async () => {
      shutdown.abort();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await Promise.all(started.map((u) => u.stop()));
      await hub.close();
      await writer.close();
      await store.close();
    },
  };
};
