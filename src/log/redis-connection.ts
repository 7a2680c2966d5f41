/**
 * One Redis, a Sentinel-monitored master, or a Cluster, behind one shape: the shared client for
 * ordinary commands (scripts defined on it work on all three) and dedicated connections for blocking
 * reads. On a Cluster a blocking read goes to a connection of its own to the master that owns the
 * key's slot: on the cluster's shared per-node connection it would stall every command to that node.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConfig } from '../config/schema.js';

export type RedisMode = 'standalone' | 'sentinel' | 'cluster';

export interface RedisConnectionOptions {
  /**
   * A command unanswered this long fails (a frozen Redis keeps TCP open) and its connection is
   * dropped and reopened: behind a silent partition the socket would otherwise wait for TCP's
   * retransmissions to give up (minutes) before a reconnect could reach a healed Redis.
   */
  commandTimeoutMs?: number;
  logger?: Logger;
}

/** Idle blocking connections kept for reuse (all nodes together). */
const MAX_IDLE_BLOCKERS = 8;

// The 16384-slot CRC16 (XMODEM) of Redis Cluster, for picking the node a blocking read goes to.
const CRC16_TABLE = new Uint16Array(256).map((_, i) => {
  let crc = i << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  return crc & 0xffff;
});

/** The cluster slot of a key, hash tags honoured (`{capsule}`: every key of a capsule, one slot). */
export const keySlot = (key: string): number => {
  let bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ b) & 0xff]!;
  return crc % 16384;
};

const describe = (config: RedisConfig): RedisMode =>
  typeof config === 'string' ? 'standalone' : 'cluster' in config ? 'cluster' : 'sentinel';

export class RedisConnection {
  readonly mode: RedisMode;
  /** The shared client: `Redis` (standalone, Sentinel) or `Cluster`. Scripts go through it. */
  readonly client: Redis | Cluster;
  /** Options every extra connection to a cluster node takes (credentials, TLS, timeouts). */
  private readonly nodeOptions: RedisOptions = {};
  private readonly idle = new Map<string, Redis[]>();
  private idleCount = 0;
  private readonly active = new Set<Redis>();
  private closed = false;

  constructor(config: RedisConfig, options: RedisConnectionOptions = {}) {
    this.mode = describe(config);
    const base: RedisOptions = {
      // Fail fast while Redis is away: the writer keeps entries queued and retries with backoff.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeout: options.commandTimeoutMs ?? 2000,
      // ioredis destroys the socket when commands wait this long without a byte back; the reconnect
      // (retryStrategy) starts at once on a fresh socket.
      socketTimeout: options.commandTimeoutMs ?? 2000,
      // A connect attempt whose SYN vanished (a partition) is given up after the same time and made
      // again: after a heal the next attempt connects at once, not at the kernel's next SYN retry.
      connectTimeout: options.commandTimeoutMs ?? 2000,
      // An idle connection (the fleet bus's) is probed after 1 s of silence: libuv sends 10 probes
      // 1 s apart, so a cut peer is found in about 11 s.
      keepAlive: 1000,
    };
    const retryStrategy = (times: number): number => Math.min(50 * times, 1000);
    if (typeof config === 'string') {
      this.client = new Redis(config, { ...base, retryStrategy });
    } else if ('cluster' in config) {
      const first = new URL(config.cluster[0]!);
      const { enableOfflineQueue: _queue, ...nodeBase } = base;
      this.nodeOptions = {
        ...nodeBase,
        ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
        ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
        ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
      };
      const clusterOptions: ClusterOptions = {
        enableOfflineQueue: false,
        clusterRetryStrategy: retryStrategy,
        redisOptions: this.nodeOptions,
        slotsRefreshTimeout: 2000,
      };
      const nodes = config.cluster.map((u) => {
        const url = new URL(u);
        return { host: url.hostname, port: Number(url.port || 6379) };
      });
      this.client = new Cluster(nodes, clusterOptions);
      // A node gone from the topology: its idle blocking connections are of no use any more.
      this.client.on('-node', (node: Redis) => this.dropIdle(`${node.options.host}:${node.options.port}`));
    } else {
      this.client = new Redis({
        ...base,
        retryStrategy,
        sentinels: config.sentinels.map((s) => {
          if (typeof s !== 'string') return s;
          const url = new URL(s);
          return { host: url.hostname, port: Number(url.port || 26379) };
        }),
        name: config.name,
        role: 'master',
        ...(config.password ? { password: config.password } : {}),
        ...(config.sentinelPassword ? { sentinelPassword: config.sentinelPassword } : {}),
        sentinelRetryStrategy: retryStrategy,
        // No `failoverDetector`: its +switch-master handler disconnects the connector even while a
        // reconnect is resolving the master, which ends the client for good (seen in the failover
        // test). A dead master's socket closes and the reconnect asks the sentinels anyway.
        // The old master came back as a replica and we are still on it: reconnect, the sentinels
        // name the new master. The failed command is not re-sent: its caller retries.
        reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 1 : false),
      });
      // Every reconnect may land on another master (a failover): idle blockers still on the old one
      // would wait on a stream that no longer grows there.
      this.client.on('ready', () => this.dropIdle());
    }
    if (this.client instanceof Redis) {
      const redis = this.client;
      // Safety net: ioredis ends a client for good when its connector fails outright (our retry
      // strategies never give up). A store that stops reconnecting would stall its writer forever.
      redis.on('end', () => {
        if (this.closed) return;
        setTimeout(() => {
          if (!this.closed && redis.status === 'end') redis.connect().catch(() => {});
        }, 1000).unref();
      });
    }
    const logger = options.logger;
    this.client.on('error', (err: Error) =>
      logger?.debug({ err: err.message, mode: this.mode }, 'redis error'),
    );
  }

  get status(): string {
    return this.client.status;
  }

  /**
   * A connection of its own for one blocking command on `key` (release() it after, or drop it). On a
   * Cluster it goes to the slot's master, or to `node` (`host:port`, from a MOVED reply) when given.
   */
  async acquireBlocking(key: string, node?: string): Promise<Redis> {
    const target = this.client instanceof Cluster ? (node ?? this.slotOwner(key)) : '';
    const pool = this.idle.get(target);
    while (pool && pool.length > 0) {
      const conn = pool.pop()!;
      this.idleCount--;
      if (conn.status === 'ready') {
        this.active.add(conn);
        return conn;
      }
      conn.disconnect();
    }
    const overrides: RedisOptions = {
      lazyConnect: true,
      enableOfflineQueue: false,
      commandTimeout: undefined,
      // A blocking read waits on purpose; its caller's guard timer drops the connection instead.
      socketTimeout: undefined,
      retryStrategy: () => null,
    };
    let conn: Redis;
    if (this.client instanceof Cluster) {
      const colon = target.lastIndexOf(':');
      conn = new Redis({
        ...this.nodeOptions,
        ...overrides,
        host: target.slice(0, colon),
        port: Number(target.slice(colon + 1)),
      });
    } else {
      // On Sentinel the duplicate asks the sentinels for the current master itself.
      conn = this.client.duplicate(overrides);
    }
    blockerNode.set(conn, target);
    conn.on('error', () => {});
    try {
      await conn.connect();
    } catch (err) {
      conn.disconnect();
      throw err;
    }
    this.active.add(conn);
    return conn;
  }

  /** Give a blocking connection back after a command that completed normally. */
  release(conn: Redis): void {
    this.active.delete(conn);
    if (this.closed || this.idleCount >= MAX_IDLE_BLOCKERS || conn.status !== 'ready') {
      conn.disconnect();
      return;
    }
    const node = blockerNode.get(conn) ?? '';
    const pool = this.idle.get(node) ?? [];
    pool.push(conn);
    this.idle.set(node, pool);
    this.idleCount++;
  }

  /** Drop a blocking connection (aborted, failed, or in an unknown state). */
  drop(conn: Redis): void {
    this.active.delete(conn);
    conn.disconnect();
  }

  /** Ask a Cluster to re-read its slot map now (after a MOVED seen on a blocking connection). */
  refreshTopology(): void {
    if (this.client instanceof Cluster) this.client.refreshSlotsCache();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.dropIdle();
    for (const conn of this.active) conn.disconnect();
    this.active.clear();
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  private slotOwner(key: string): string {
    const cluster = this.client as Cluster;
    const owner = cluster.slots[keySlot(key)]?.[0];
    if (!owner) throw new Error(`no cluster node known for slot ${keySlot(key)} (cluster ${cluster.status})`);
    return owner;
  }

  private dropIdle(node?: string): void {
    for (const [key, pool] of this.idle) {
      if (node !== undefined && key !== node) continue;
      for (const conn of pool) conn.disconnect();
      this.idleCount -= pool.length;
      this.idle.delete(key);
    }
  }
}

/** The node (`host:port`, '' off Cluster) each blocking connection was opened to. */
const blockerNode = new WeakMap<Redis, string>();
