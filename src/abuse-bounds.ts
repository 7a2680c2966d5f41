/**
 * Composition of the abuse bounds, kept out of gateway.ts: the limits over the backend's counters
 * (Redis, shared by replicas; or memory: backend.ts), the limits, the client IP resolver
 * (trustProxy) and the Node server's header/body timeouts.
 */
import type { Context } from 'hono';
import type { Logger } from 'pino';
import { clientIpResolver, originIpResolver, type RequestOrigin } from './auth/client-ip.js';
import { AbuseLimits } from './auth/limits.js';
import type { GatewayConfig } from './config/schema.js';
import type { LimitCounters } from './auth/limit-counters.js';

export interface AbuseBounds {
  limits: AbuseLimits;
  bodyTimeoutMs: number;
  clientIp: (c: Context) => string;
  /** The same address from a Node request's origin (routes served before Hono: direct-routes.ts). */
  originIp: (o: RequestOrigin) => string;
  /** Options for Node's http.createServer (through @hono/node-server's serverOptions). */
  serverOptions: { requestTimeout: number; headersTimeout: number; connectionsCheckingInterval: number };
  close(): void;
}

export const createAbuseBounds = (
  config: GatewayConfig,
  counters: LimitCounters,
  logger: Logger,
): AbuseBounds => {
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
    originIp: originIpResolver(config.server.trustProxy),
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
