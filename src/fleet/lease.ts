/**
 * Per-capsule ingestion leases in Redis: `<prefix>:{capsule}:lease` holds `<replicaId>|<token>` with
 * a TTL; acquiring mints the capsule's fencing token (`fence` in the capsule's meta hash, the same
 * hash append.lua checks), so the lease key and the token share the `{capsule}` slot on a Cluster.
 * Renew and release compare the exact value: a lease that was lost is never extended or deleted.
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

interface LeaseCommands {
  mgLeaseAcquire(
    lease: string,
    meta: string,
    replicaId: string,
    ttlMs: number,
    reclaim: string,
  ): Promise<[number, string, string?]>;
  mgLeaseRenew(lease: string, value: string, ttlMs: number): Promise<number>;
  mgLeaseRelease(lease: string, value: string): Promise<number>;
  mgLeasePeek(lease: string, meta: string): Promise<[string, string]>;
}

/** A lease this replica holds. */
export interface HeldLease {
  capsule: string;
  /** The exact stored value, compared on renew and release. */
  value: string;
  /** The fencing token minted when it was acquired. */
  fence: number;
  /** The token it replaced (the capsule's previous owner's; 0 for the first). */
  previous: number;
}

export interface LeaseView {
  /** The holding replica, or null when the lease is free. */
  owner: string | null;
  /** The capsule's current fencing token (0 before any acquisition). */
  fence: number;
}

const ownerOf = (value: string): string | null => {
  const bar = value.lastIndexOf('|');
  return value === '' ? null : bar < 0 ? value : value.slice(0, bar);
};

export class LeaseStore {
  private readonly redis: (Redis | Cluster) & LeaseCommands;
  private readonly createdAt = Date.now();

  constructor(
    client: Redis | Cluster,
    readonly replicaId: string,
    private readonly ttlMs: number,
    private readonly prefix = 'mg',
  ) {
    this.redis = client as (Redis | Cluster) & LeaseCommands;
    this.redis.defineCommand('mgLeaseAcquire', { numberOfKeys: 2, lua: lua('lease-acquire') });
    this.redis.defineCommand('mgLeaseRenew', { numberOfKeys: 1, lua: lua('lease-renew') });
    this.redis.defineCommand('mgLeaseRelease', { numberOfKeys: 1, lua: lua('lease-release') });
    this.redis.defineCommand('mgLeasePeek', { numberOfKeys: 2, lua: lua('lease-peek') });
  }

  keys(capsule: string): { lease: string; meta: string } {
    const base = `${this.prefix}:{${capsule}}`;
    return { lease: `${base}:lease`, meta: `${base}:meta` };
  }

  /**
   * Take the lease if it is free: a new token. Null when it is held by anyone, this id included,
   * except while this process is within one TTL of its start: then a lease under this id is its
   * previous incarnation's (a restart), taken back at once rather than after it expires.
   */
  async acquire(capsule: string): Promise<HeldLease | null> {
    const { lease, meta } = this.keys(capsule);
    const reclaim = Date.now() - this.createdAt < this.ttlMs ? '1' : '0';
    const [ok, value, previous] = await this.redis.mgLeaseAcquire(
      lease,
      meta,
      this.replicaId,
      this.ttlMs,
      reclaim,
    );
    if (Number(ok) !== 1) return null;
    return {
      capsule,
      value,
      fence: Number(value.slice(value.lastIndexOf('|') + 1)),
      previous: Number(previous ?? 0),
    };
  }

  /** Extend a held lease; false when it is no longer ours (expired, taken). Throws when Redis fails. */
  async renew(held: HeldLease): Promise<boolean> {
    return Number(await this.redis.mgLeaseRenew(this.keys(held.capsule).lease, held.value, this.ttlMs)) === 1;
  }

  /** Give the lease up (only if still ours). */
  async release(held: HeldLease): Promise<boolean> {
    return Number(await this.redis.mgLeaseRelease(this.keys(held.capsule).lease, held.value)) === 1;
  }

  async peek(capsule: string): Promise<LeaseView> {
    const { lease, meta } = this.keys(capsule);
    const [value, fence] = await this.redis.mgLeasePeek(lease, meta);
    return { owner: ownerOf(value), fence: Number(fence) };
  }
}
