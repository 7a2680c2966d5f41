/**
 * The gateway's configuration, validated with zod. One schema for the merged result of config file,
 * environment and flags (see load.ts); every field has a default except the capsules to front.
 */
import { hostname } from 'node:os';
import { z } from 'zod';
import { validStreamGrant } from '../auth/stream-grants.js';

/** Capsule ids as the contract fixes them. */
export const CAPSULE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

const isHttpUrl = (u: string): boolean => {
  try {
    const { protocol } = new URL(u);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
};

const httpUrl = z.string().refine(isHttpUrl, 'must be an http:// or https:// URL');

const capsuleSchema = z.object({
  id: z.string().regex(CAPSULE_ID, 'must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}'),
  url: httpUrl,
  /** Door token sent upstream as `Authorization: Bearer …`; never logged, never sent downstream. */
  doorToken: z.string().min(1, 'must not be empty').optional(),
});

const scopeSchema = z.enum(['submit', 'observe', 'control', 'admin', 'ops', 'write']);

/**
 * Who outgoing webhooks may call (Durable Streams subscriptions; docs/surfaces/durable-streams-subscriptions.md).
 * Private, loopback, link-local and other internal addresses are refused (SSRF); `allowLoopback`
 * admits loopback receivers (development and tests), `allowHosts` the hosts listed, whatever they
 * resolve to.
 */
const webhooksSchema = z
  .object({
    allowLoopback: z.boolean().default(false),
    allowHosts: z
      .array(
        z
          .string()
          .min(1)
          .max(253)
          .transform((h) => h.toLowerCase()),
      )
      .max(1000)
      .default([]),
    /** How long a receiver may take to answer one delivery. */
    timeoutMs: z.number().positive().max(120_000).default(10_000),
  })
  .strict();

const DAY_MS = 86_400_000;

/** The writable, general Durable Streams surface and its bounds. */
const durableStreamsSchema = z
  .object({
    /** Serve the rest of /v1/stream/* as a full Durable Streams server (scope `write` when auth is on). */
    writable: z.boolean().default(false),
    /** Streams that may exist at once (creates past it are refused with 507). */
    maxStreams: z.number().int().min(1).max(10_000_000).default(10_000),
    /**
     * Each owner's share of maxStreams when auth is on (streams it created, its own or under a
     * grant); past it 507 too. Without auth there is one owner and only maxStreams applies.
     */
    maxStreamsPerOwner: z.number().int().min(1).max(10_000_000).default(1000),
    /** Largest single message: a JSON-mode element, or a whole append of a byte stream. */
    maxMessageBytes: z
      .number()
      .int()
      .min(1)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024),
    /** Largest request body of a create or an append. */
    maxBodyBytes: z
      .number()
      .int()
      .min(1)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024),
    /**
     * Bytes of messages each replica keeps in its own memory for reads on Redis (messages never
     * change at their offset, so a page found whole here skips Redis but for the one meta read
     * that fences it); 0: off. The embedded store holds every message in memory anyway.
     */
    readCacheBytes: z
      .number()
      .int()
      .min(0)
      .max(16 * 1024 * 1024 * 1024)
      .default(64 * 1024 * 1024),
    subscriptions: z
      .object({
        /** Subscriptions one owner may hold (without auth: the one shared owner). */
        maxPerOwner: z.number().int().min(1).max(1_000_000).default(100),
        /** Wakes one owner may have in flight at once (webhook deliveries and claims). */
        maxWakesPerOwner: z.number().int().min(1).max(1_000_000).default(100),
        /** Rotated-out signing keys stay in the JWKS this long (receivers replaying deliveries). */
        replayWindowMs: z
          .number()
          .int()
          .min(300_000)
          .max(30 * DAY_MS)
          .default(DAY_MS),
        /** Each replica looks for due deliveries, lapsed leases and retries this often. */
        sweepMs: z.number().int().min(50).max(60_000).default(1000),
        /** The webhook signing key is replaced when it is this old (0: never). */
        keyRotationMs: z
          .number()
          .min(0)
          .max(3650 * DAY_MS)
          .default(90 * DAY_MS),
      })
      .strict()
      .default(() => ({
        maxPerOwner: 100,
        maxWakesPerOwner: 100,
        replayWindowMs: DAY_MS,
        sweepMs: 1000,
        keyRotationMs: 90 * DAY_MS,
      })),
  })
  .strict();

/** The A2A surface (docs/surfaces/a2a.md). */
const a2aSchema = z
  .object({
    /** Push notifications: webhooks of a task's status and artifact updates (A2A §4.3.3). */
    pushNotifications: z
      .object({
        /** Configs one task may hold; past it -32000. */
        maxConfigsPerTask: z.number().int().min(1).max(1000).default(10),
        /** Tasks with configs one owner may hold at once (without auth: the one shared owner). */
        maxTasksPerOwner: z.number().int().min(1).max(1_000_000).default(100),
        /** Who they may be sent to; absent: as the top-level `webhooks` says. */
        webhooks: webhooksSchema.optional(),
      })
      .strict()
      .default(() => ({ maxConfigsPerTask: 10, maxTasksPerOwner: 100 })),
  })
  .strict();

/** A key of any surface (BeeOS `oag_…` keys are just keys); only its SHA-256 is held. */
const apiKeySchema = z
  .object({
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be the lowercase hex SHA-256 of the key (64 characters)'),
    owner: z.string().min(1, 'must not be empty'),
    scopes: z.array(scopeSchema).default(['submit']),
    /** Capsules this key may use; ["*"] = all. */
    capsules: z.array(z.string().min(1)).min(1, 'must list at least one capsule or "*"').default(['*']),
    /**
     * General Durable Streams path patterns shared with every key granted them (`team-a/**`);
     * every other path a key names is a stream of its owner's own (docs/security.md).
     */
    streams: z
      .array(
        z
          .string()
          .refine(
            validStreamGrant,
            'must be "/"-separated segments: a name, "*" (one segment) or "**" (any number); no empty, "." or ".." segment',
          ),
      )
      .default([]),
  })
  .strict();

/** Bearer JWTs (via `jose`): sub → owner, scope (space-separated) → scopes, capsules → capsules. */
const jwtSchema = z
  .object({
    issuer: z.string().min(1),
    audience: z.string().min(1),
    /** HS256 shared secret. */
    secret: z.string().min(16, 'must be at least 16 characters').optional(),
    /** PEM (SPKI) public key for RS256 / ES256 / EdDSA. */
    publicKey: z.string().min(1).optional(),
    /** Path of a JWKS file (`{keys: [...]}`) for RS256 / ES256 / EdDSA. */
    jwksFile: z.string().min(1).optional(),
    algorithms: z
      .array(z.enum(['HS256', 'RS256', 'ES256', 'EdDSA']))
      .min(1)
      .optional(),
  })
  .strict()
  .refine((j) => [j.secret, j.publicKey, j.jwksFile].filter((v) => v !== undefined).length === 1, {
    message: 'must set exactly one of secret, publicKey, jwksFile',
  });

/** Admin API tokens, held only as SHA-256 (env GATEWAY_ADMIN_TOKEN adds the hash of a clear one). */
const adminTokenSchema = z
  .object({
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be the lowercase hex SHA-256 of the token (64 characters)'),
  })
  .strict();

/** Who may call: keys, JWTs, browser tickets, the admin API (docs/security.md). */
const authSchema = z
  .object({
    /** Serve without any credential on a non-loopback address (explicit opt-out; warned at start). */
    open: z.boolean().default(false),
    apiKeys: z.array(apiKeySchema).default([]),
    jwt: jwtSchema.optional(),
    /** The admin API (`/admin/`) is enabled only when at least one is configured. */
    adminTokens: z.array(adminTokenSchema).default([]),
    /** Lifetime of a browser ticket (`POST /auth/tickets`). */
    ticketTtlMs: z.number().int().min(1000).max(3_600_000).default(60_000),
    /** Ticket signing key shared by replicas; absent = one random key kept in Redis (or per process). */
    ticketSecret: z.string().min(16, 'must be at least 16 characters').optional(),
  })
  .strict();

const REDIS_URL_MESSAGE = 'must be a redis:// or rediss:// URL';
const isRedisUrl = (u: string): boolean => {
  try {
    const { protocol, hostname } = new URL(u);
    return (protocol === 'redis:' || protocol === 'rediss:') && hostname !== '';
  } catch {
    return false;
  }
};
const redisUrl = z.string({ error: REDIS_URL_MESSAGE }).refine(isRedisUrl, REDIS_URL_MESSAGE);
const port = z.number().int().min(1).max(65535);

/** A sentinel's address: `redis://host:port` (no credentials: see sentinelPassword) or {host, port}. */
const SENTINEL_MESSAGE = 'must be a redis://host:port URL or {host, port}';
const isSentinelUrl = (u: string): boolean =>
  isRedisUrl(u) && new URL(u).protocol === 'redis:' && !new URL(u).username && !new URL(u).password;
const sentinelAddress = z.union(
  [z.string().refine(isSentinelUrl, SENTINEL_MESSAGE), z.object({ host: z.string().min(1), port }).strict()],
  { error: SENTINEL_MESSAGE },
);

const redisSentinelSchema = z
  .object({
    sentinels: z
      .array(sentinelAddress, { error: 'must be a list of sentinels' })
      .min(1, 'must list at least one sentinel'),
    /** The master set's name as the sentinels know it (`sentinel monitor <name> …`). */
    name: z
      .string({ error: 'must be the name the sentinels monitor the master under (e.g. mymaster)' })
      .min(1, 'must be the name the sentinels monitor the master under (e.g. mymaster)'),
    /** The master's (and replicas') password. */
    password: z.string().min(1, 'must not be empty').optional(),
    /** The sentinels' own password (`requirepass` on the sentinels), if any. */
    sentinelPassword: z.string().min(1, 'must not be empty').optional(),
  })
  .strict();

const redisClusterSchema = z
  .object({
    /** Seed nodes (any subset of the cluster); credentials and rediss:// apply to every node. */
    cluster: z
      .array(redisUrl, { error: 'must be a list of redis:// URLs' })
      .min(1, 'must list at least one node'),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    // Runs even when a URL above was refused: those have their own message already.
    const identity = (u: string | undefined): string | null => {
      if (u === undefined || !isRedisUrl(u)) return null;
      const url = new URL(u);
      return `${url.protocol}${url.username}:${url.password}`;
    };
    const first = identity(cfg.cluster[0]);
    cfg.cluster.forEach((u, i) => {
      const own = identity(u);
      if (i > 0 && first !== null && own !== null && own !== first) {
        ctx.addIssue({
          code: 'custom',
          path: ['cluster', i],
          message: 'must use the same scheme and credentials as cluster[0]',
        });
      }
    });
  });

export type RedisSentinelConfig = z.output<typeof redisSentinelSchema>;
export type RedisClusterConfig = z.output<typeof redisClusterSchema>;
export type RedisConfig = string | RedisSentinelConfig | RedisClusterConfig;

/**
 * Dispatched by shape rather than a zod union, so a bad field gets its own message instead of
 * "Invalid input" for the whole union: a string is a URL, `{cluster}` a Cluster, `{sentinels}` Sentinel.
 */
const redisSchema = z.unknown().transform((value, ctx): RedisConfig | null => {
  if (value === null) return null;
  const schema =
    typeof value === 'string'
      ? redisUrl
      : typeof value === 'object' && !Array.isArray(value) && 'cluster' in value
        ? redisClusterSchema
        : typeof value === 'object' && !Array.isArray(value) && 'sentinels' in value
          ? redisSentinelSchema
          : null;
  if (!schema) {
    ctx.addIssue({
      code: 'custom',
      message: 'must be a redis:// or rediss:// URL, {sentinels: [...], name} or {cluster: [...]}',
    });
    return z.NEVER;
  }
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  for (const issue of result.error.issues) {
    ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  }
  return z.NEVER;
});

/** A token bucket: `requestsPerSecond` refill, `burst` size (default: one second's worth). 0 = off. */
const bucketSchema = z
  .object({
    requestsPerSecond: z.number().min(0).default(0),
    burst: z.number().int().min(0).optional(),
  })
  .strict()
  .default({ requestsPerSecond: 0 });

/**
 * Abuse bounds (src/auth/limits.ts), shared by every replica on Redis. Every count is off (0) by
 * default, so the demo, tests and benchmarks are never throttled.
 */
const limitsSchema = z
  .object({
    /** Requests per client IP (after trustProxy). */
    ip: bucketSchema,
    /** Requests per credential (API key, JWT subject, ticket's key). */
    key: bucketSchema,
    /** Open requests on capsule surfaces (streams, long-polls and the rest) per client IP. */
    streamsPerIp: z.number().int().min(0).default(0),
    /** The same per credential. */
    streamsPerKey: z.number().int().min(0).default(0),
    /** POSTs on a capsule's surfaces (submissions, control calls) per owner per minute. */
    submissionsPerMinute: z.number().int().min(0).default(0),
  })
  .strict();

/**
 * Whose address is the client's: false = the socket peer; a number = that many proxies in front
 * (the address that many hops back in X-Forwarded-For); a list = proxies' addresses or CIDRs, the
 * first X-Forwarded-For hop from the right not among them.
 */
const trustProxySchema = z
  .union([z.literal(false), z.number().int().min(1).max(32), z.array(z.string().min(1)).min(1)])
  .default(false);

/**
 * The listener and what every request shares: address, TLS and HTTP/2, CORS, the client's address
 * behind proxies, the body bound and the slow-loris deadlines.
 */
const serverSchema = z
  .object({
    port: z.number().int().min(0).max(65535).default(8080),
    /**
     * Address to bind. Absent: every interface (0.0.0.0) when auth is configured (auth.apiKeys,
     * auth.jwt or auth.open), else loopback only, so a gateway started with zero setup is never open
     * to a network.
     */
    host: z.string().min(1).optional(),
    /** Base for absolute URLs the gateway returns; null = derived from the request. */
    publicUrl: httpUrl.nullable().default(null),
    /** Worker processes on the one port (each a full replica; Redis needed past 1); auto = the cores. */
    workers: z.union([z.literal('auto'), z.number().int().min(1, 'must be at least 1').max(256)]).default(1),
    /** PEM files: HTTPS with HTTP/2 (ALPN h2) and HTTP/1.1 on the same port; null = plain HTTP. */
    tls: z
      .object({
        cert: z.string().min(1, 'must name a PEM file'),
        key: z.string().min(1, 'must name a PEM file'),
      })
      .strict()
      .nullable()
      .default(null),
    /** `cleartext`: HTTP/2 without TLS (h2c, prior knowledge) beside HTTP/1.1, for a proxy in front. */
    http2: z
      .object({ cleartext: z.boolean().default(false) })
      .strict()
      .default({ cleartext: false }),
    cors: z.object({ origins: z.array(z.string().min(1)).default([]) }).default({ origins: [] }),
    trustProxy: trustProxySchema,
    /** Largest request body accepted on the capsule surfaces. */
    bodyLimitBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /** Longest wait for a request's headers (slow-loris); streams are not affected. */
    headersTimeoutMs: z.number().positive().max(600_000).default(60_000),
    /** Longest wait for a request's body once its headers arrived; a stream's response is not cut. */
    bodyTimeoutMs: z.number().positive().max(600_000).default(30_000),
  })
  .strict();

/** What the gateway owes the clients it streams to, on every surface. */
const downstreamSchema = z
  .object({
    /** SSE heartbeats / keepalive comments, from connection open. */
    heartbeatMs: z.number().positive().default(15_000),
    /** Longest a long-poll is held (every surface, Durable Streams included). */
    longPollMaxMs: z.number().positive().max(300_000).default(30_000),
    /** Flue SSE: an `upToDate` control event at least this often when idle. */
    idleControlMs: z.number().positive().default(30_000),
    /** Records queued per live client before it is disconnected as slow. */
    maxQueuedRecords: z.number().int().positive().default(10_000),
    /** TCP keep-alive idle time on accepted sockets (then 10 probes 1 s apart). */
    keepAliveMs: z.number().int().min(1000).max(600_000).default(1000),
    /** A live stream whose sent bytes stay unacknowledged (retransmitted) this long is closed. */
    writeStallMs: z.number().int().min(100).max(600_000).default(5000),
  })
  .strict();

/** The log's store, what it keeps, and how the gateway rides out its absence. */
const storeSchema = z
  .object({
    /** One Redis (a URL), a Sentinel-monitored master, or a Cluster; null = the in-memory store. */
    redis: redisSchema.default(null),
    retention: z
      .object({
        /** Records kept per capsule (0 = unbounded). */
        maxRecords: z.number().int().min(0).default(100_000),
        /** Records older than this are dropped (0 = forever). */
        maxAgeMs: z
          .number()
          .int()
          .min(0)
          .default(7 * DAY_MS),
        /** About this many bytes kept per capsule (0 = unbounded): a flood cannot push out more. */
        maxBytes: z
          .number()
          .int()
          .min(0)
          .default(256 * 1024 * 1024),
      })
      .strict()
      .default({ maxRecords: 100_000, maxAgeMs: 7 * DAY_MS, maxBytes: 256 * 1024 * 1024 }),
    /** A Redis command unanswered this long fails, and its connection is dropped and reopened. */
    commandTimeoutMs: z.number().int().min(50).max(60_000).default(2000),
    /** How often this replica checks that the store answers. */
    probeMs: z.number().int().min(50).max(60_000).default(1000),
    /** No answer for this long: the store is unreachable from here; readers are told to go elsewhere. */
    unreachableAfterMs: z.number().int().min(100).max(300_000).default(3000),
    /** Entries (frames and facts) held in memory per capsule while the store is unreachable. */
    maxPendingEntries: z.number().int().positive().default(100_000),
    /** Bytes held in memory per capsule while the store is unreachable (frames and facts). */
    maxPendingBytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024),
    /**
     * Group commit: a capsule ingesting more than 1,000 frames/s appends at most once per this many
     * milliseconds (src/log/batch-linger.ts); 0 = append as soon as the previous append returned.
     */
    appendLingerMs: z.number().min(0).max(1000).default(5),
  })
  .strict();

/** Watching the capsules: deadlines and liveness checks on every capsule connection. */
const upstreamSchema = z
  .object({
    /** TCP keep-alive idle time on capsule sockets (then 10 probes 1 s apart: a dead peer in ~idle + 10 s). */
    keepAliveMs: z.number().int().min(1000).max(600_000).default(1000),
    /** Time allowed for a watch connection's response headers. */
    connectTimeoutMs: z.number().int().min(100).max(120_000).default(5000),
    /** The capsule's heartbeat interval until one is observed (spec: 15 s). */
    heartbeatMs: z.number().int().min(10).max(600_000).default(15_000),
    /** 0.4+ lines: this many heartbeat intervals without a byte end the watch as lost. */
    heartbeatMisses: z.number().min(1.5).max(100).default(3),
    /** An owned capsule unreachable this long is given up so another replica can take it over. */
    giveUpAfterMs: z.number().int().min(100).max(3_600_000).default(5000),
    /** A capsule given up is not taken back by this replica for this long (unless nobody else did). */
    giveUpCooldownMs: z.number().int().min(0).max(3_600_000).default(30_000),
  })
  .strict();

/** Several replicas on one store (src/fleet): who this one is, and who ingests which capsule. */
const fleetSchema = z
  .object({
    /** This replica's id in a fleet (stable per process): who owns a capsule, in /capsules. */
    replicaId: z
      .string()
      .regex(/^[^\s|]{1,128}$/, 'must be 1-128 characters without spaces or "|"')
      .default(() => `${hostname()}-${process.pid}`),
    /** Capsule ownership leases: a dead owner's capsules move after about ttlMs. */
    lease: z
      .object({
        ttlMs: z.number().int().min(100).default(5000),
        renewMs: z.number().int().min(10).default(1000),
      })
      .strict()
      .refine((l) => l.renewMs * 2 <= l.ttlMs, { message: 'renewMs must be at most half of ttlMs' })
      .default({ ttlMs: 5000, renewMs: 1000 }),
    /** Directory of running-capsule records to front (`--discover-running`); null = no discovery. */
    discoverRunning: z.string().min(1, 'must not be empty').nullable().default(null),
  })
  .strict();

/** The submission queue (docs/submission-queue.md): past a bound, 429 with Retry-After. */
const queueSchema = z
  .object({
    maxPerCapsule: z.number().int().min(1).max(1_000_000).default(1000),
    maxPerOwner: z.number().int().min(1).max(1_000_000).default(100),
    /** What a refusal tells the client to wait (Retry-After, rounded up to whole seconds). */
    retryAfterMs: z.number().int().min(1000).max(3_600_000).default(2000),
    /** How long a submission waits for the store before its client is told the service is unavailable. */
    storeTimeoutMs: z.number().positive().max(300_000).default(5000),
  })
  .strict();

/** A group's defaults: the group parsed from nothing. */
const defaulted = <T extends z.ZodType>(schema: T) => schema.default(() => schema.parse({}) as never);

/**
 * The whole configuration, grouped by concern; every duration is in milliseconds and named `…Ms`,
 * every size in bytes and named `…Bytes`. Keys read in code exactly as the file writes them
 * (`config.downstream.heartbeatMs`). Older names are mapped here by deprecated-keys.ts first.
 */
export const configSchema = z
  .object({
    server: defaulted(serverSchema),
    downstream: defaulted(downstreamSchema),
    store: defaulted(storeSchema),
    upstream: defaulted(upstreamSchema),
    fleet: defaulted(fleetSchema),
    auth: defaulted(authSchema),
    limits: defaulted(limitsSchema),
    queue: defaulted(queueSchema),
    webhooks: defaulted(webhooksSchema),
    /** `GET /v1/follow`: streams one connection may hold. */
    follow: z
      .object({ maxStreams: z.number().int().min(1).max(4096).default(256) })
      .strict()
      .default({ maxStreams: 256 }),
    /** General Durable Streams under /v1/stream/* (docs/surfaces/durable-streams-writable.md); off by default. */
    durableStreams: defaulted(durableStreamsSchema),
    a2a: defaulted(a2aSchema),
    capsules: z.array(capsuleSchema).default([]),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    demo: z.boolean().default(false),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const seen = new Set<string>();
    cfg.capsules.forEach((c, i) => {
      if (seen.has(c.id)) {
        ctx.addIssue({
          code: 'custom',
          path: ['capsules', i, 'id'],
          message: `duplicate capsule id "${c.id}"`,
        });
      }
      seen.add(c.id);
    });
  })
  .transform((cfg) => {
    const { auth } = cfg;
    const credentials = auth.apiKeys.length > 0 || auth.jwt !== undefined || auth.open;
    return {
      ...cfg,
      server: { ...cfg.server, host: cfg.server.host ?? (credentials ? '0.0.0.0' : '127.0.0.1') },
    };
  });

export type GatewayConfig = z.output<typeof configSchema>;
export type GatewayConfigInput = z.input<typeof configSchema>;
export type CapsuleConfig = z.output<typeof capsuleSchema>;
export type ApiKeyConfig = z.output<typeof apiKeySchema>;
export type JwtConfig = z.output<typeof jwtSchema>;
