/**
 * Where the gateway keeps its state, chosen once: on Redis (shared by a fleet of replicas, kept over
 * restarts) or in this process's memory (one replica, nothing survives a restart). Every part that
 * differs between the two is made here, so the composition root (gateway.ts) never asks which store
 * it has: the capsule logs, the general streams and their subscriptions, ownership of capsules, the
 * capsule registry, once-only claims, the abuse-bound counters and the admission signal.
 */
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/schema.js';
import { MemoryLimitCounters, RedisLimitCounters, type LimitCounters } from './auth/limit-counters.js';
import { AdmissionBus } from './fleet/admission-bus.js';
import { MemoryClaims, RedisClaims, type ClaimStore } from './fleet/claims.js';
import { LocalOwnership } from './fleet/local-ownership.js';
import { FleetOwnership } from './fleet/ownership.js';
import { MemoryCapsuleRegistry, type CapsuleRegistry } from './fleet/registry.js';
import { RedisCapsuleRegistry } from './fleet/registry-redis.js';
import type { CapsuleOwnership, IngestionControl } from './fleet/types.js';
import { MemoryStore } from './log/memory-store.js';
import { RedisStore } from './log/redis-store.js';
import { StoreHealth } from './log/store-health.js';
import type { LogStore } from './log/store.js';
import { MemoryStreamStore } from './streams/memory-stream-store.js';
import { RedisStreamStore } from './streams/redis-stream-store.js';
import type { StreamBounds, StreamStore } from './streams/types.js';
import { MemorySubscriptionStore } from './subscriptions/memory-subscription-store.js';
import { RedisSubscriptionStore } from './subscriptions/redis-subscription-store.js';
import type { SubscriptionStore } from './subscriptions/types.js';
import { MemoryTaskWebhookStore } from './webhooks/memory-task-webhooks.js';
import { RedisTaskWebhookStore } from './webhooks/redis-task-webhooks.js';
import type { TaskWebhookStore } from './webhooks/task-webhooks.js';

/** Key names that tests sharing one Redis keep apart (GatewayTuning.fleet and .streams). */
export interface BackendKeys {
  /** The registry hash. */
  registryKey?: string;
  /** The prefix of the leases, the live-replica set and the buses. */
  fleetPrefix?: string;
  registryResyncMs?: number;
  /** The general streams' and subscriptions' prefix. */
  streamsPrefix?: string;
}

export interface Backend {
  readonly store: LogStore;
  /**
   * Whether appends carry their lease's fencing token: only where other replicas may write the same
   * log (the embedded store has one writer and ignores fences).
   */
  readonly fenced: boolean;
  /** Which capsules this replica ingests: one owner per capsule in a fleet, else this process. */
  ownership(control: IngestionControl): CapsuleOwnership;
  /**
   * Whether this replica reaches its store now, probed (started here); null where the store is this
   * process's memory and always reachable.
   */
  storeHealth(): StoreHealth | null;
  /**
   * Admission signals between replicas (an admission wakes the capsule's owner); null in one
   * process, where the queue wakes its own dispatcher.
   */
  admissionBus(): AdmissionBus | null;
  registry(): CapsuleRegistry;
  /** Once-only decisions (the same idempotency key on two replicas at once). */
  claims(): ClaimStore;
  limitCounters(): LimitCounters;
  /** `readCacheBytes`: the Redis store's read cache (config `durableStreams.readCacheBytes`). */
  streamStore(bounds: StreamBounds, readCacheBytes?: number): StreamStore;
  subscriptionStore(): SubscriptionStore;
  /** A2A push notification configs and their delivery cursors (Redis: a new owner continues). */
  taskWebhookStore(keyPrefix?: string): TaskWebhookStore;
  /** Stops what the backend itself started (the health probe's reconnect hook); the store closes apart. */
  close(): void;
}

const retentionOf = (config: GatewayConfig) => ({
  maxRecords: config.store.retention.maxRecords,
  maxBytes: config.store.retention.maxBytes,
  maxAgeMs: config.store.retention.maxAgeMs,
});

const redisBackend = (
  config: GatewayConfig,
  redis: NonNullable<GatewayConfig['store']['redis']>,
  logger: Logger,
  keys: BackendKeys,
): Backend => {
  // A URL, a Sentinel-monitored master or a Cluster: the store builds the matching connection.
  const store = new RedisStore(redis, {
    retention: retentionOf(config),
    commandTimeoutMs: config.store.commandTimeoutMs,
    logger: logger.child({ room: 'log' }),
  });
  const { client } = store.connection;
  let unhook = (): void => undefined;
  return {
    store,
    fenced: true,
    ownership: (control) =>
      new FleetOwnership({
        client,
        replicaId: config.fleet.replicaId,
        ttlMs: config.fleet.lease.ttlMs,
        renewMs: config.fleet.lease.renewMs,
        giveUpAfterMs: config.upstream.giveUpAfterMs,
        giveUpCooldownMs: config.upstream.giveUpCooldownMs,
        ...(keys.fleetPrefix ? { keyPrefix: keys.fleetPrefix } : {}),
        control,
        logger: logger.child({ room: 'fleet' }),
      }),
    storeHealth: () => {
      // A replica cut from Redis tells its readers within seconds (they resume on one that is not).
      const health = new StoreHealth({
        ping: () => store.ping(),
        probeMs: config.store.probeMs,
        unreachableAfterMs: config.store.unreachableAfterMs,
        logger: logger.child({ room: 'log' }),
      });
      health.start();
      // A reconnect (the heal) is checked at once, not at the next probe.
      const poke = (): void => health.poke();
      client.on('ready', poke);
      unhook = () => void client.off('ready', poke);
      return health;
    },
    admissionBus: () =>
      new AdmissionBus(client, config.fleet.replicaId, keys.fleetPrefix, logger.child({ room: 'queue' })),
    registry: () =>
      new RedisCapsuleRegistry(store.connection, {
        key: keys.registryKey,
        resyncMs: keys.registryResyncMs,
        logger: logger.child({ room: 'fleet' }),
      }),
    claims: () => new RedisClaims(client),
    limitCounters: () => new RedisLimitCounters(client),
    streamStore: (bounds, readCacheBytes) =>
      new RedisStreamStore(store.connection, {
        bounds,
        keyPrefix: keys.streamsPrefix,
        ...(readCacheBytes !== undefined ? { readCacheBytes } : {}),
        logger: logger.child({ room: 'streams' }),
      }),
    subscriptionStore: () => new RedisSubscriptionStore(client, keys.streamsPrefix),
    taskWebhookStore: (keyPrefix) => new RedisTaskWebhookStore(client, keyPrefix),
    close: () => unhook(),
  };
};

const memoryBackend = (config: GatewayConfig, logger: Logger): Backend => {
  logger.warn('no Redis configured: using the embedded in-memory store; nothing survives a restart');
  return {
    store: new MemoryStore(retentionOf(config)),
    fenced: false,
    ownership: (control) => new LocalOwnership(config.fleet.replicaId, control),
    storeHealth: () => null,
    admissionBus: () => null,
    registry: () => new MemoryCapsuleRegistry(),
    claims: () => new MemoryClaims(),
    limitCounters: () => new MemoryLimitCounters(),
    streamStore: (bounds) => new MemoryStreamStore(bounds),
    subscriptionStore: () => new MemorySubscriptionStore(),
    taskWebhookStore: () => new MemoryTaskWebhookStore(),
    close: () => undefined,
  };
};

/** Redis when the config names one, else the embedded store. */
export const createBackend = (config: GatewayConfig, logger: Logger, keys: BackendKeys = {}): Backend =>
  config.store.redis ? redisBackend(config, config.store.redis, logger, keys) : memoryBackend(config, logger);
