/**
 * Composition of the abuse bounds, kept out of gateway.ts: the counters on the store
 * (Redis, shared by replicas; or memory), the limits, the client IP resolver
 * (trustProxy) and the Node server's header/body timeouts.
 */
import type { Context } from 'hono';
import type { Logger } from 'pino';
import { clientIpResolver } from './auth/client-ip.js';
import { AbuseLimits } from './auth/limits.js';
import type { GatewayConfig } from './config/schema.js';
import { MemoryLimitCounters, RedisLimitCounters } from './auth/limit-counters.js';
import { RedisStore } from './log/redis-store.js';
import type { LogStore } from './log/store.js';

export interface AbuseBounds {
  limits: AbuseLimits;
  bodyTimeoutMs: number;
  clientIp: (c: Context) => string;
  /** Options for Node's http.createServer (through @hono/node-server's serverOptions). */
  serverOptions: { requestTimeout: number; headersTimeout: number; connectionsCheckingInterval: number };
  close(): void;
}

export const createAbuseBounds = (config: GatewayConfig, store: LogStore, logger: Logger): AbuseBounds => {
  const counters =
    store instanceof RedisStore ? new RedisLimitCounters(store.connection.client) : new MemoryLimitCounters();
  const limits = new AbuseLimits(
    counters,
    config.limits,
    config.fleet.replicaId,
    logger.child({ room: 'auth' }),
  );
  const headersTimeout = Math.round(config.server.headersTimeoutMs);
  return {
    limits,
    bodyTimeoutMs: Math.round(config.server.bodyTimeoutMs),
    clientIp: clientIpResolver(config.server.trustProxy),
    serverOptions: {
      // Long-lived streams must not be cut by Node's whole-request timeout; heartbeats keep them
      // honest. Headers are bounded by Node, bodies by the body-timeout middleware.
      requestTimeout: 0,
      headersTimeout,
      // Node checks the header deadline on this interval (30 s by default, longer than the deadline).
      connectionsCheckingInterval: Math.min(5_000, Math.max(50, Math.floor(headersTimeout / 2))),
    },
    close: () => limits.close(),
  };
};
