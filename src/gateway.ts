/**
 * The composition root: config → store → log writer → one upstream per capsule → hub → core → adapters
 * → HTTP server. Used by the CLI, the demo and the tests; owns start order and drain order.
 */
import type { AddressInfo, Socket } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/schema.js';
import { GatewayCoreImpl } from './core/gateway-core.js';
import { SubmissionQueues } from './core/submission-queue.js';
import type { DispatchTuning } from './core/dispatcher.js';
import { logFrameSource } from './core/log-frames.js';
import { deliveryObserver, LatencyMetrics } from './core/latency.js';
import { deliveryTraces } from './core/delivery-traces.js';
import type { GatewayCore } from './core/types.js';
import { Hub } from './hub/hub.js';
import type { AdapterConfig, AdapterDeps } from './http/adapter-deps.js';
import { createHttpApp } from './http/app.js';
import { createHttpServer, type HttpServer } from './http/http-server.js';
import { backlogWarning, kernelBacklogCap, LISTEN_BACKLOG } from './http/listen-backlog.js';
import { pacedListener } from './http/request-pacing.js';
import { SendStallWatch } from './http/send-stall.js';
import { createAbuseBounds } from './abuse-bounds.js';
import { createSurfaces } from './surfaces.js';
import { LogWriter } from './log/log-writer.js';
import { StoreHealth } from './log/store-health.js';
import { MemoryStore } from './log/memory-store.js';
import { RedisStore } from './log/redis-store.js';
import { RedisClaims } from './fleet/claims.js';
import type { LogStore } from './log/store.js';
import { MemoryStreamStore } from './streams/memory-stream-store.js';
import { RedisStreamStore } from './streams/redis-stream-store.js';
import type { StreamStore } from './streams/types.js';
import { Subscriptions } from './subscriptions/manager.js';
import { MemorySubscriptionStore } from './subscriptions/memory-subscription-store.js';
import { RedisSubscriptionStore } from './subscriptions/redis-subscription-store.js';
import { CapsuleUpstream } from './upstream/capsule-upstream.js';
import { LocalOwnership } from './fleet/local-ownership.js';
import { FleetOwnership } from './fleet/ownership.js';
import { AdmissionBus } from './fleet/admission-bus.js';
import type { CapsuleOwnership, IngestionControl } from './fleet/types.js';
import { createAdminTokenCheck } from './auth/admin-token.js';
import { RunningCapsuleDiscovery } from './fleet/discovery.js';
import { ingestByOwnership, LiveCapsules } from './fleet/live-capsules.js';
import { MemoryCapsuleRegistry, type CapsuleEntries, type CapsuleRegistry } from './fleet/registry.js';
import { RedisCapsuleRegistry } from './fleet/registry-redis.js';
import { createAdminRoutes } from './http/admin-routes.js';
import { createAuthenticator } from './auth/authenticator.js';
import { createJwtVerifier } from './auth/jwt.js';
import { createKeyRing } from './auth/keys.js';
import { authPosture } from './auth/secure-default.js';
import { createTicketAuthority, ticketSecretSource } from './auth/tickets.js';
import { ConfigError } from './config/load.js';

export interface RunningGateway {
  /** `http://host:port` as bound (host 0.0.0.0 is reported as 127.0.0.1). */
  url: string;
  port: number;
  /** What the port speaks: `http/1.1`, `h2+http/1.1` (TLS) or `h2c+http/1.1`. */
  protocols: string;
  core: GatewayCore;
  store: LogStore;
  writer: LogWriter;
  hub: Hub;
  upstreams: Map<string, CapsuleUpstream>;
  /** The fleet's capsule registry (Redis, or memory with the embedded store). */
  registry: CapsuleRegistry;
  /** The serving set, following the registry. */
  capsules: LiveCapsules;
  /** Which capsules this replica ingests (a fleet on Redis: one owner per capsule; else this process). */
  ownership: CapsuleOwnership;
  /**
   * The config's capsules again (SIGHUP): each whose url or door token changed is put in the
   * registry, which replaces its upstream. Capsules the file no longer names are left to the admin
   * API (another replica's file may still name them). Resolves with the ids changed.
   */
  reloadCapsules(capsules: GatewayConfig['capsules']): Promise<string[]>;
  /** Drain: stop accepting, end live streams, flush pending appends (bounded), stop upstreams. */
  close(options?: { flushTimeoutMs?: number }): Promise<void>;
}

/** What the adapters read, under the names the config file gives it (downstream.*, server.*, …). */
export const adapterConfigOf = (config: GatewayConfig): AdapterConfig => ({
  heartbeatMs: config.downstream.heartbeatMs,
  longPollMaxMs: config.downstream.longPollMaxMs,
  idleControlMs: config.downstream.idleControlMs,
  maxQueuedRecords: config.downstream.maxQueuedRecords,
  bodyLimitBytes: config.server.bodyLimitBytes,
  publicUrl: config.server.publicUrl,
  follow: config.follow,
  durableStreams: {
    writable: config.durableStreams.writable,
    maxMessageBytes: config.durableStreams.maxMessageBytes,
    maxBodyBytes: config.durableStreams.maxBodyBytes,
  },
  webhooks: { allowLoopback: config.webhooks.allowLoopback, allowHosts: config.webhooks.allowHosts },
});

/** Subscriptions keep their state where the streams do (Redis: shared by the fleet, kept over restarts). */
const createSubscriptions = (
  config: GatewayConfig,
  store: LogStore,
  streams: StreamStore | undefined,
  logger: Logger,
  keyPrefix?: string,
): Subscriptions | undefined => {
  if (!streams) return undefined;
  const { webhooks } = config;
  const { subscriptions } = config.durableStreams;
  const subscriptionStore =
    store instanceof RedisStore
      ? new RedisSubscriptionStore(store.connection.client, keyPrefix)
      : new MemorySubscriptionStore();
  return new Subscriptions(
    subscriptionStore,
    streams,
    {
      receivers: { allowLoopback: webhooks.allowLoopback, allowHosts: webhooks.allowHosts },
      maxPerOwner: subscriptions.maxPerOwner,
      maxWakesPerOwner: subscriptions.maxWakesPerOwner,
      replayWindowMs: subscriptions.replayWindowMs,
      replicaId: config.fleet.replicaId,
      sweepMs: subscriptions.sweepMs,
      deliveryTimeoutMs: webhooks.timeoutMs,
      tokenTtlSeconds: 3600,
      keyRotationMs: subscriptions.keyRotationMs,
    },
    logger.child({ room: 'subscriptions' }),
  );
};

/** The general streams live where the capsule logs do: on the same Redis, or in memory. */
const createStreamStore = (
  config: GatewayConfig,
  store: LogStore,
  logger: Logger,
  keyPrefix?: string,
): StreamStore | undefined => {
  if (!config.durableStreams.writable) return undefined;
  const { maxStreams, maxStreamsPerOwner } = config.durableStreams;
  const bounds = { maxStreams, maxStreamsPerOwner: Math.min(maxStreamsPerOwner, maxStreams) };
  return store instanceof RedisStore
    ? new RedisStreamStore(store.connection, { bounds, keyPrefix, logger: logger.child({ room: 'streams' }) })
    : new MemoryStreamStore(bounds);
};

const createStore = (config: GatewayConfig, logger: Logger): LogStore => {
  const { retention } = config.store;
  // A URL, a Sentinel-monitored master or a Cluster: the store builds the matching connection.
  if (config.store.redis)
    return new RedisStore(config.store.redis, {
      retention,
      commandTimeoutMs: config.store.commandTimeoutMs,
      logger: logger.child({ room: 'log' }),
    });
  logger.warn('no Redis configured: using the embedded in-memory store; nothing survives a restart');
  return new MemoryStore(retention);
};

/** The longest start-up waits for this replica's capsules to be watched before it listens. */
const START_WAIT_MS = 2000;
/** A door refusing our token re-reads the running records at most this often. */
const RECHECK_RECORDS_MS = 2000;

/** Knobs that are not configuration: tests shorten the upstream reconnect backoff with them. */
export interface GatewayTuning {
  upstream?: {
    backoffBaseMs?: number;
    backoffCapMs?: number;
    submitTimeoutMs?: number;
    /** Capsules that wrote nothing before this gateway first watches them (the demo's). */
    freshCapsules?: ReadonlySet<string>;
  };
  /** e.g. a short store timeout for submissions in tests that freeze Redis */
  core?: { submitStoreTimeoutMs?: number };
  /**
   * Registry hash and the prefix of the leases, live-replica set and bus (tests sharing one Redis
   * keep fleets apart with both), the registry's resync and the discovery rescan.
   */
  fleet?: { registryKey?: string; keyPrefix?: string; registryResyncMs?: number; discoveryRescanMs?: number };
  /** Where the kernel's backlog cap is read (a test stands in a low one). */
  listen?: { somaxconnFile?: string };
  /** The submission queue's dispatcher (e.g. a short orphan grace in failover tests). */
  queue?: DispatchTuning;
  /** The general streams' Redis key prefix (tests sharing one Redis keep their bounds apart). */
  streams?: { keyPrefix?: string };
}

export const startGateway = async (
  config: GatewayConfig,
  logger: Logger,
  tuning: GatewayTuning = {},
): Promise<RunningGateway> => {
  // Secure by default: no credential configured → loopback only, unless auth.open says so.
  const posture = authPosture(config);
  if ('refuse' in posture) throw new ConfigError(posture.refuse);
  if (posture.posture === 'open') {
    logger.warn(
      { host: config.server.host },
      'auth.open: serving every caller without credentials on a network address (every scope, every capsule)',
    );
  }
  const jwt = config.auth.jwt
    ? await createJwtVerifier(config.auth.jwt).catch((err: unknown) => {
        throw new ConfigError(`invalid configuration (jwt): ${(err as Error).message}`);
      })
    : null;
  const store = createStore(config, logger);
  const writer = new LogWriter(store, {
    maxPendingEntries: config.store.maxPendingEntries,
    maxPendingBytes: config.store.maxPendingBytes,
    appendLingerMs: config.store.appendLingerMs,
    logger: logger.child({ room: 'log' }),
  });
  const upstreams = new Map<string, CapsuleUpstream>();
  // Ingestion follows ownership: with Redis, one replica of the fleet per capsule (a lease with a
  // fencing token stamped on its appends); with the embedded store this process owns everything.
  const control: IngestionControl = {
    start: (capsule, fence, continues) => {
      writer.setFence(capsule, store instanceof RedisStore ? fence : undefined, { adopt: continues });
      // The new term seeds from the stored tail: what is still queued for the capsule settles first
      // (appended, or refused by the fence), or the seed would miss it and the replay repeat it.
      void writer.flush(capsule).then(() => {
        if (!ownership.owns(capsule)) return;
        upstreams.get(capsule)?.start();
        // The owner hands the capsule's queued submissions over, fenced like its appends.
        queues.startDispatch(capsule);
      });
    },
    stop: async (capsule) => {
      queues.stopDispatch(capsule);
      await upstreams.get(capsule)?.stopIngesting();
    },
    unreachableFor: (capsule) => upstreams.get(capsule)?.unreachableFor() ?? 0,
    flush: async (capsule, timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        writer.flush(capsule),
        new Promise<void>((r) => (timer = setTimeout(r, timeoutMs))),
      ]);
      clearTimeout(timer);
    },
  };
  const ownership: CapsuleOwnership =
    store instanceof RedisStore
      ? new FleetOwnership({
          client: store.connection.client,
          replicaId: config.fleet.replicaId,
          ttlMs: config.fleet.lease.ttlMs,
          renewMs: config.fleet.lease.renewMs,
          giveUpAfterMs: config.upstream.giveUpAfterMs,
          giveUpCooldownMs: config.upstream.giveUpCooldownMs,
          ...(tuning.fleet?.keyPrefix ? { keyPrefix: tuning.fleet.keyPrefix } : {}),
          control,
          logger: logger.child({ room: 'fleet' }),
        })
      : new LocalOwnership(config.fleet.replicaId, control);
  // An append refused by the fence: another replica took the capsule over; stop ingesting it now.
  writer.onFenced((capsule, fence) => ownership.lost(capsule, 'append fenced', fence));
  const latency = new LatencyMetrics();
  const observeLag = deliveryObserver(latency);
  const traceDeliveries = deliveryTraces();
  // A replica cut from Redis tells its readers within seconds (they resume on a replica that is not).
  const storeHealth =
    store instanceof RedisStore
      ? new StoreHealth({
          ping: () => store.ping(),
          probeMs: config.store.probeMs,
          unreachableAfterMs: config.store.unreachableAfterMs,
          logger: logger.child({ room: 'log' }),
        })
      : null;
  storeHealth?.start();
  // A reconnect (the heal) is checked at once, not at the next probe.
  const pokeHealth = (): void => storeHealth?.poke();
  if (store instanceof RedisStore) store.connection.client.on('ready', pokeHealth);
  const hub = new Hub(store, {
    ...(storeHealth ? { storeHealth } : {}),
    maxQueuedRecords: config.downstream.maxQueuedRecords,
    logger: logger.child({ room: 'hub' }),
    onDelivered: (records, surfaces) => {
      observeLag(records, surfaces);
      traceDeliveries(records, surfaces);
    },
  });
  const capsules = new LiveCapsules({
    upstreams,
    create: (id, entry) => {
      // Age retention also reaches a capsule that never appends again (an idle or removed one).
      writer.track(id);
      return new CapsuleUpstream({
        capsule: id,
        url: entry.url,
        doorToken: entry.doorToken ?? null,
        // A door that refuses our token (0.5+ re-mints it at every restart): read the running records
        // again now rather than at the next rescan; a new token replaces this upstream.
        onState: (s) => {
          if (s.state === 'backoff' && s.reason === 'unauthorized') recheckRecords();
        },
        writer,
        store,
        // A submit sees its task start in the log, whichever replica ingests the capsule.
        logFrames: logFrameSource(hub, id),
        logger: logger.child({ room: 'upstream' }),
        keepAliveMs: config.upstream.keepAliveMs,
        connectTimeoutMs: config.upstream.connectTimeoutMs,
        heartbeatMs: config.upstream.heartbeatMs,
        heartbeatMisses: config.upstream.heartbeatMisses,
        ...tuning.upstream,
      });
    },
    ingestion: {
      // A replaced upstream (new url or token) of a capsule still owned ingests at once.
      add: (id, upstream) => {
        if (ownership.owns(id)) upstream.start();
      },
      remove: ingestByOwnership.remove,
    },
    logger: logger.child({ room: 'fleet' }),
  });
  const queues = new SubmissionQueues({
    hub,
    writer,
    upstreams,
    limits: config.queue,
    storeTimeoutMs: config.queue.storeTimeoutMs,
    logger: logger.child({ room: 'queue' }),
    ...(tuning.queue ? { dispatch: tuning.queue } : {}),
    announce: (capsule, offset) => admissions?.announce(capsule, offset),
    latency,
  });
  // Across replicas an admission wakes the capsule's owner through Redis (one process: in-process).
  const admissions =
    store instanceof RedisStore
      ? new AdmissionBus(
          store.connection.client,
          config.fleet.replicaId,
          (capsule, offset) => queues.wake(capsule, offset),
          tuning.fleet?.keyPrefix,
          logger.child({ room: 'queue' }),
        )
      : null;
  const registry: CapsuleRegistry =
    store instanceof RedisStore
      ? new RedisCapsuleRegistry(store.connection, {
          key: tuning.fleet?.registryKey,
          resyncMs: tuning.fleet?.registryResyncMs,
          logger: logger.child({ room: 'fleet' }),
        })
      : new MemoryCapsuleRegistry();
  // The configured capsules are served at once, before Redis answers; the registry follows.
  const seed = new Map(config.capsules.map((c) => [c.id, { url: c.url, doorToken: c.doorToken }]));
  const seedEntries: CapsuleEntries = new Map(
    [...seed].map(([id, c]) => [
      id,
      { url: c.url, ...(c.doorToken ? { doorToken: c.doorToken } : {}), source: 'config', updatedAt: 0 },
    ]),
  );
  let discovery: RunningCapsuleDiscovery | null = null;
  let recheckedAt = 0;
  const recheckRecords = (): void => {
    // Bounded: a door that keeps refusing costs one directory scan per few seconds, not a storm.
    if (!discovery || Date.now() - recheckedAt < RECHECK_RECORDS_MS) return;
    recheckedAt = Date.now();
    void discovery.scan();
  };
  capsules.onChange((ids) => ownership.setCapsules(ids));
  await capsules.apply(seedEntries);
  const shutdown = new AbortController();
  const core = new GatewayCoreImpl({
    hub,
    writer,
    upstreams,
    shutdownSignal: shutdown.signal,
    logger: logger.child({ room: 'core' }),
    submitStoreTimeoutMs: config.queue.storeTimeoutMs,
    queues,
    // Once-only decisions across replicas (same idempotency key on two replicas at once).
    ...(store instanceof RedisStore ? { claims: new RedisClaims(store.connection.client) } : {}),
    ...tuning.core,
  });

  const streams = createStreamStore(config, store, logger, tuning.streams?.keyPrefix);
  const subscriptions = createSubscriptions(config, store, streams, logger, tuning.streams?.keyPrefix);
  subscriptions?.start();
  const deps: AdapterDeps = {
    core,
    config: adapterConfigOf(config),
    logger: logger.child({ room: 'http' }),
    ...(streams ? { streams } : {}),
    ...(subscriptions ? { subscriptions } : {}),
  };
  const tickets = createTicketAuthority(
    ticketSecretSource(config.auth.ticketSecret, store),
    config.auth.ticketTtlMs,
  );
  const authenticator = createAuthenticator({ keys: createKeyRing(config.auth.apiKeys), jwt, tickets });
  const bounds = createAbuseBounds(config, store, logger);
  const { app } = createHttpApp({
    auth: { authenticator, tickets, posture: posture.posture, clientIp: bounds.clientIp },
    limits: bounds.limits,
    bodyTimeoutMs: bounds.bodyTimeoutMs,
    core,
    logger,
    corsOrigins: config.server.cors.origins,
    // Agrees with what the hub tells readers: while the store is found unreachable, 503 at once.
    storeReady: () => (storeHealth?.reachable === false ? Promise.resolve(false) : store.ping()),
    internals: () => ({ hub: hub.stats(), writer: writer.stats() }),
    latency,
    ownership,
    surfaces: [
      {
        name: 'admin',
        prefix: '/admin/',
        routes: createAdminRoutes({
          registry,
          token: createAdminTokenCheck(config.auth.adminTokens.map((t) => t.sha256)),
        }),
      },
      ...createSurfaces(deps),
    ],
  });

  registry.onChange((entries) => void capsules.apply(entries));
  registry.start(seed);
  discovery = config.fleet.discoverRunning
    ? new RunningCapsuleDiscovery({
        dir: config.fleet.discoverRunning,
        registry,
        rescanMs: tuning.fleet?.discoveryRescanMs,
        logger: logger.child({ room: 'fleet' }),
      })
    : null;
  discovery?.start();
  ownership.start();
  // A capsule this replica wins is watching before the first request is served, so a task submitted
  // right after start is seen from its first frame (bounded: Redis or a capsule may be away).
  const startedAt = Date.now();
  await ownership.settled(START_WAIT_MS);
  const left = Math.max(0, START_WAIT_MS - (Date.now() - startedAt));
  await Promise.all([...upstreams].filter(([id]) => ownership.owns(id)).map(([, u]) => u.connected(left)));

  const sendStalls = new SendStallWatch({
    stallMs: config.downstream.writeStallMs,
    onStall: (socket, stalledMs) =>
      logger.warn(
        { peer: `${socket.remoteAddress}:${socket.remotePort}`, stalledMs },
        'client stopped acknowledging: connection closed',
      ),
  });
  const http: HttpServer = createHttpServer(
    { tls: config.server.tls, cleartextHttp2: config.server.http2.cleartext, http1: bounds.serverOptions },
    // Hono's Node listener behind the storm pacing (request-pacing.ts).
    pacedListener(getRequestListener(app.fetch, { hostname: config.server.host })),
  );
  const server = await new Promise<HttpServer['server']>((resolve, reject) => {
    const s = http.server;
    s.once('error', reject);
    // Downstream liveness: an idle connection (a parked long-poll) is probed by TCP keep-alive; one
    // with bytes going out (a live stream) by the send-stall watch, since keep-alive never probes it.
    s.on('connection', (socket: Socket) => {
      socket.setKeepAlive(true, config.downstream.keepAliveMs);
      sendStalls.watch(socket);
    });
    // Node's default accept backlog (511) overflows when thousands of clients reconnect at once (a
    // resume storm after a restart): the kernel drops their handshakes and they retry after 1 s, 3 s….
    // The kernel caps this at net.core.somaxconn (listen-backlog.ts).
    s.listen({ port: config.server.port, host: config.server.host, backlog: LISTEN_BACKLOG }, () =>
      resolve(s),
    );
  });
  const somaxconn = kernelBacklogCap(tuning.listen?.somaxconnFile);
  const lowBacklog = backlogWarning(somaxconn);
  if (lowBacklog) logger.warn({ somaxconn, requested: LISTEN_BACKLOG }, lowBacklog);
  const port = (server.address() as AddressInfo).port;
  const { host: bound } = config.server;
  const host = bound === '0.0.0.0' || bound === '::' ? '127.0.0.1' : bound;

  let closing: Promise<void> | null = null;
  const close = (options: { flushTimeoutMs?: number } = {}): Promise<void> => {
    closing ??= (async () => {
      // Leases first (stop ingesting, flush, release, announce): a rolling restart hands each
      // capsule to another replica at once, before this one drains its HTTP clients.
      await ownership.releaseAll(Math.min(5000, options.flushTimeoutMs ?? 5000));
      const closed = http.close();
      // Streams end with each protocol's own end signal, then their sockets close.
      shutdown.abort();
      queues.close();
      admissions?.close();
      await hub.close();
      storeHealth?.close();
      if (store instanceof RedisStore) store.connection.client.off('ready', pokeHealth);
      http.closeIdle();
      await discovery?.close();
      await registry.close();
      await capsules.close();
      const flushed = await Promise.race([
        writer.flush().then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), options.flushTimeoutMs ?? 10_000).unref()),
      ]);
      if (!flushed)
        logger.warn({ pending: writer.stats().queued }, 'drain: pending appends not flushed in time');
      await writer.close();
      // Give ended streams a moment to flush their last bytes, then cut whatever remains.
      const forced = setTimeout(() => http.closeAll(), 2_000);
      forced.unref();
      await closed;
      clearTimeout(forced);
      sendStalls.close();
      await ownership.close();
      bounds.close();
      await subscriptions?.close();
      await streams?.close();
      await store.close();
    })();
    return closing;
  };

  const reloadCapsules = async (list: GatewayConfig['capsules']): Promise<string[]> => {
    const current = await registry.list();
    const changed: string[] = [];
    for (const c of list) {
      const before = current.get(c.id);
      if (before && before.url === c.url && before.doorToken === c.doorToken) continue;
      await registry.put(c.id, {
        url: c.url,
        ...(c.doorToken ? { doorToken: c.doorToken } : {}),
        source: 'config',
        updatedAt: Date.now(),
      });
      changed.push(c.id);
    }
    return changed;
  };

  return {
    url: `${http.scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    protocols: http.protocols,
    core,
    store,
    writer,
    hub,
    upstreams,
    registry,
    capsules,
    ownership,
    reloadCapsules,
    close,
  };
};
