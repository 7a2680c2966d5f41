/**
 * The composition root: config → backend (Redis or memory: backend.ts) → log writer → hub → queues →
 * ownership → one upstream per capsule → core → adapters → HTTP server. Used by the CLI, the demo
 * and the tests; owns start order and drain order.
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
import type { DirectListener } from './http/direct-routes.js';
import { createHttpServer, type HttpServer } from './http/http-server.js';
import { backlogWarning, kernelBacklogCap, LISTEN_BACKLOG } from './http/listen-backlog.js';
import { pacedListener, type RequestListener } from './http/request-pacing.js';
import { SendStallWatch } from './http/send-stall.js';
import { createAbuseBounds, type AbuseBounds } from './abuse-bounds.js';
import { createBackend, type Backend } from './backend.js';
import { createSurfaces } from './surfaces.js';
import { LogWriter } from './log/log-writer.js';
import type { LogStore } from './log/store.js';
import type { StreamStore } from './streams/types.js';
import { Subscriptions } from './subscriptions/manager.js';
import { CapsuleUpstream } from './upstream/capsule-upstream.js';
import type { CapsuleOwnership, IngestionControl } from './fleet/types.js';
import { createAdminTokenCheck } from './auth/admin-token.js';
import { RunningCapsuleDiscovery } from './fleet/discovery.js';
import { ingestByOwnership, LiveCapsules } from './fleet/live-capsules.js';
import type { CapsuleEntries, CapsuleRegistry } from './fleet/registry.js';
import { createAdminRoutes } from './http/admin-routes.js';
import { createAuthenticator } from './auth/authenticator.js';
import { createJwtVerifier } from './auth/jwt.js';
import { createKeyRing } from './auth/keys.js';
import { authPosture } from './auth/secure-default.js';
import { createTicketAuthority, ticketSecretSource } from './auth/tickets.js';
import { ConfigError } from './config/load.js';
import { withTimeout } from './timeouts.js';

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
  /** Requests served before Hono by a surface's direct route (src/http/direct-routes.ts) so far. */
  directServed(): number;
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

/** The general streams live where the capsule logs do, with their subscriptions beside them. */
const createGeneralStreams = (
  config: GatewayConfig,
  backend: Backend,
  logger: Logger,
): { streams?: StreamStore; subscriptions?: Subscriptions } => {
  if (!config.durableStreams.writable) return {};
  const { webhooks } = config;
  const { maxStreams, maxStreamsPerOwner, subscriptions, readCacheBytes } = config.durableStreams;
  const streams = backend.streamStore(
    { maxStreams, maxStreamsPerOwner: Math.min(maxStreamsPerOwner, maxStreams) },
    readCacheBytes,
  );
  const manager = new Subscriptions(
    backend.subscriptionStore(),
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
  return { streams, subscriptions: manager };
};

/** A2A push notifications keep their configs and cursors where the log is (Redis: a new owner continues). */
const a2aPushOf = (
  config: GatewayConfig,
  backend: Backend,
  ownership: CapsuleOwnership,
  tuning: GatewayTuning['a2aPush'],
): NonNullable<AdapterDeps['a2aPush']> => {
  const push = config.a2a.pushNotifications;
  const webhooks = push.webhooks ?? config.webhooks;
  return {
    store: backend.taskWebhookStore(tuning?.keyPrefix),
    owns: (capsule) => ownership.owns(capsule),
    receivers: { allowLoopback: webhooks.allowLoopback, allowHosts: webhooks.allowHosts },
    maxConfigsPerTask: push.maxConfigsPerTask,
    maxTasksPerOwner: push.maxTasksPerOwner,
    timeoutMs: webhooks.timeoutMs,
    sweepMs: tuning?.sweepMs ?? 1000,
    retryFirstMs: tuning?.retryFirstMs ?? 1000,
  };
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
  /** A2A push notifications: their Redis key prefix, sweep and first retry wait (tests shorten them). */
  a2aPush?: { keyPrefix?: string; sweepMs?: number; retryFirstMs?: number };
  /** Routes served before Hono (src/http/direct-routes.ts): on unless false (tests compare both ways). */
  http?: { directRoutes?: boolean };
}

/** Secure by default: no credential configured → loopback only, unless auth.open says so. */
const checkAuth = async (config: GatewayConfig, logger: Logger) => {
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
  return { posture: posture.posture, jwt };
};

/**
 * What ownership asks of ingestion. With Redis, one replica of the fleet ingests each capsule (a
 * lease with a fencing token stamped on its appends); with the embedded store this process owns
 * everything.
 */
const ingestionControl = (
  writer: LogWriter,
  upstreams: Map<string, CapsuleUpstream>,
  queues: SubmissionQueues,
  fenced: boolean,
): IngestionControl => ({
  start: (capsule, fence, continues, held) => {
    writer.setFence(capsule, fenced ? fence : undefined, { adopt: continues });
    // The new term seeds from the stored tail: what is still queued for the capsule settles first
    // (appended, or refused by the fence), or the seed would miss it and the replay repeat it.
    void writer.flush(capsule).then(() => {
      if (!held()) return;
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
    await withTimeout(writer.flush(capsule), timeoutMs);
  },
});

/** The configured capsules, as registry entries: served at once, before Redis answers. */
const configuredCapsules = (config: GatewayConfig) => {
  const seed = new Map(config.capsules.map((c) => [c.id, { url: c.url, doorToken: c.doorToken }]));
  const entries: CapsuleEntries = new Map(
    [...seed].map(([id, c]) => [
      id,
      { url: c.url, ...(c.doorToken ? { doorToken: c.doorToken } : {}), source: 'config', updatedAt: 0 },
    ]),
  );
  return { seed, entries };
};

/** The config's capsules put in the registry where their url or door token changed; their ids. */
const reloadCapsules = async (
  registry: CapsuleRegistry,
  list: GatewayConfig['capsules'],
): Promise<string[]> => {
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

/** A capsule this replica wins is watching before the first request is served (bounded). */
const waitForOwnedCapsules = async (
  ownership: CapsuleOwnership,
  upstreams: Map<string, CapsuleUpstream>,
): Promise<void> => {
  const startedAt = Date.now();
  await ownership.settled(START_WAIT_MS);
  const left = Math.max(0, START_WAIT_MS - (Date.now() - startedAt));
  await Promise.all([...upstreams].filter(([id]) => ownership.owns(id)).map(([, u]) => u.connected(left)));
};

/** The HTTP server, bound: TLS or cleartext, HTTP/2 where configured, downstream liveness checks. */
const listen = async (
  config: GatewayConfig,
  listener: RequestListener,
  http1: AbuseBounds['serverOptions'],
  logger: Logger,
  tuning: GatewayTuning,
): Promise<{ http: HttpServer; sendStalls: SendStallWatch; url: string; port: number }> => {
  const sendStalls = new SendStallWatch({
    stallMs: config.downstream.writeStallMs,
    onStall: (socket, stalledMs) =>
      logger.warn(
        { peer: `${socket.remoteAddress}:${socket.remotePort}`, stalledMs },
        'client stopped acknowledging: connection closed',
      ),
  });
  const http: HttpServer = createHttpServer(
    { tls: config.server.tls, cleartextHttp2: config.server.http2.cleartext, http1 },
    // Hono's Node listener behind the storm pacing (request-pacing.ts).
    pacedListener(listener),
  );
  const server = await new Promise<HttpServer['server']>((resolve, reject) => {
    const s = http.server;
    s.once('error', reject);
    // Downstream liveness: an idle connection (a parked long-poll) is probed by TCP keep-alive; one
    // with bytes going out (a live stream) by the send-stall watch, its keep-alive moved past twice
    // its heartbeat once it starts (sse-transport.ts), so a healthy stream is never probed.
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
  const host =
    config.server.host === '0.0.0.0' || config.server.host === '::' ? '127.0.0.1' : config.server.host;
  return {
    http,
    sendStalls,
    url: `${http.scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
  };
};

export const startGateway = async (
  config: GatewayConfig,
  logger: Logger,
  tuning: GatewayTuning = {},
): Promise<RunningGateway> => {
  const { posture, jwt } = await checkAuth(config, logger);

  // Where the state lives: Redis (a fleet) or memory (one process), chosen once.
  const backend = createBackend(config, logger, {
    registryKey: tuning.fleet?.registryKey,
    fleetPrefix: tuning.fleet?.keyPrefix,
    registryResyncMs: tuning.fleet?.registryResyncMs,
    streamsPrefix: tuning.streams?.keyPrefix,
  });
  const { store } = backend;

  // The log: the writer batches appends; the hub reads each capsule's tail once for every client.
  const writer = new LogWriter(store, {
    maxPendingEntries: config.store.maxPendingEntries,
    maxPendingBytes: config.store.maxPendingBytes,
    appendLingerMs: config.store.appendLingerMs,
    logger: logger.child({ room: 'log' }),
  });
  const storeHealth = backend.storeHealth();
  const latency = new LatencyMetrics();
  const observeLag = deliveryObserver(latency);
  const traceDeliveries = deliveryTraces();
  const hub = new Hub(store, {
    ...(storeHealth ? { storeHealth } : {}),
    maxQueuedRecords: config.downstream.maxQueuedRecords,
    logger: logger.child({ room: 'hub' }),
    onDelivered: (records, surfaces) => {
      observeLag(records, surfaces);
      traceDeliveries(records, surfaces);
    },
  });

  // Submissions queue in the log; across replicas an admission wakes the capsule's owner.
  const upstreams = new Map<string, CapsuleUpstream>();
  const admissions = backend.admissionBus();
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
  admissions?.onAdmitted((capsule, offset) => queues.wake(capsule, offset));

  // Ingestion follows ownership.
  const ownership = backend.ownership(ingestionControl(writer, upstreams, queues, backend.fenced));
  // An append refused by the fence: another replica took the capsule over; stop ingesting it now.
  writer.onFenced((capsule, fence) => ownership.lost(capsule, 'append fenced', fence));

  // Which capsules are served: the registry, fed by the config, the admin API and the running records.
  const registry = backend.registry();
  const discovery = config.fleet.discoverRunning
    ? new RunningCapsuleDiscovery({
        dir: config.fleet.discoverRunning,
        registry,
        rescanMs: tuning.fleet?.discoveryRescanMs,
        logger: logger.child({ room: 'fleet' }),
      })
    : null;
  let recheckedAt = 0;
  const recheckRecords = (): void => {
    // Bounded: a door that keeps refusing costs one directory scan per few seconds, not a storm.
    if (!discovery || Date.now() - recheckedAt < RECHECK_RECORDS_MS) return;
    recheckedAt = Date.now();
    void discovery.scan();
  };
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
  capsules.onChange((ids) => ownership.setCapsules(ids));
  const configured = configuredCapsules(config);
  await capsules.apply(configured.entries);

  // The core every surface asks, and the surfaces.
  const shutdown = new AbortController();
  const core = new GatewayCoreImpl({
    hub,
    writer,
    upstreams,
    shutdownSignal: shutdown.signal,
    logger: logger.child({ room: 'core' }),
    submitStoreTimeoutMs: config.queue.storeTimeoutMs,
    queues,
    claims: backend.claims(),
    ...tuning.core,
  });
  const { streams, subscriptions } = createGeneralStreams(config, backend, logger);
  subscriptions?.start();
  const deps: AdapterDeps = {
    core,
    config: adapterConfigOf(config),
    logger: logger.child({ room: 'http' }),
    ...(streams ? { streams } : {}),
    ...(subscriptions ? { subscriptions } : {}),
    // A fleet kept apart by its key prefix (tests sharing one Redis) keeps its push configs apart too.
    a2aPush: a2aPushOf(config, backend, ownership, {
      ...(tuning.fleet?.keyPrefix ? { keyPrefix: `${tuning.fleet.keyPrefix}:a2a` } : {}),
      ...tuning.a2aPush,
    }),
  };
  const tickets = createTicketAuthority(
    ticketSecretSource(config.auth.ticketSecret, store),
    config.auth.ticketTtlMs,
  );
  const authenticator = createAuthenticator({ keys: createKeyRing(config.auth.apiKeys), jwt, tickets });
  const bounds = createAbuseBounds(config, backend.limitCounters(), logger);
  const { app, directFirst } = createHttpApp({
    auth: { authenticator, tickets, posture, clientIp: bounds.clientIp, originIp: bounds.originIp },
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

  // Start following the fleet, win this replica's capsules, then listen.
  registry.onChange((entries) => void capsules.apply(entries));
  registry.start(configured.seed);
  discovery?.start();
  ownership.start();
  await waitForOwnedCapsules(ownership, upstreams);
  const hono = getRequestListener(app.fetch, { hostname: config.server.host }) as RequestListener;
  const listener = tuning.http?.directRoutes === false ? hono : directFirst(hono);
  const directServed = (): number => ('served' in listener ? (listener as DirectListener).served : 0);
  const { http, sendStalls, url, port } = await listen(
    config,
    listener,
    bounds.serverOptions,
    logger,
    tuning,
  );

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
      backend.close();
      http.closeIdle();
      await discovery?.close();
      await registry.close();
      await capsules.close();
      const flushed = await withTimeout(
        writer.flush().then(() => true),
        options.flushTimeoutMs ?? 10_000,
        () => false,
      );
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

  return {
    url,
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
    reloadCapsules: (list) => reloadCapsules(registry, list),
    directServed,
    close,
  };
};
