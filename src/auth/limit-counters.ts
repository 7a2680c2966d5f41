/**
 * Counters behind the abuse bounds (src/auth/limits.ts), shared by every replica of a fleet: token
 * buckets (rate limits) and leased concurrency slots (open streams). Redis: one small Lua script per
 * operation on a single key (single-slot on a Cluster), Redis's clock; memory: the same in a map, for
 * the embedded store where this process is the whole fleet. `AbuseLimits` (limits.ts) sees only the
 * `LimitCounters` interface, never Redis; adapters see neither.
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

export interface BucketSpec {
  /** Tokens added per second. */
  ratePerSecond: number;
  /** Bucket size: the burst allowed after a quiet period. */
  burst: number;
}

export type TakeResult = { allowed: true } | { allowed: false; retryAfterMs: number };

export interface LimitCounters {
  /** Take `n` tokens from bucket `key` (created full), or say how long until there are enough. */
  take(key: string, spec: BucketSpec, n?: number): Promise<TakeResult>;
  /** Hold one of `cap` slots of `key` as `member` (a lease renewed by `renew`); false at the cap. */
  acquireSlot(key: string, member: string, cap: number, leaseMs: number): Promise<boolean>;
  releaseSlot(key: string, member: string): Promise<void>;
  /** Extend the leases of slots still held (every few seconds, for this replica's open ones). */
  renewSlots(held: ReadonlyMap<string, readonly string[]>, leaseMs: number): Promise<void>;
}

export class MemoryLimitCounters implements LimitCounters {
  private readonly buckets = new Map<string, { tokens: number; ms: number }>();
  private readonly slots = new Map<string, Set<string>>();

  take(key: string, spec: BucketSpec, n = 1): Promise<TakeResult> {
    const now = Date.now();
    const b = this.buckets.get(key) ?? { tokens: spec.burst, ms: now };
    b.tokens = Math.min(spec.burst, b.tokens + (Math.max(0, now - b.ms) * spec.ratePerSecond) / 1000);
    b.ms = now;
    this.buckets.set(key, b);
    if (b.tokens >= n) {
      b.tokens -= n;
      return Promise.resolve({ allowed: true });
    }
    // Full buckets are dropped lazily: a map bounded by the keys seen within one refill time.
    if (this.buckets.size > 100_000) this.sweep(now, spec);
    return Promise.resolve({
      allowed: false,
      retryAfterMs: Math.ceil(((n - b.tokens) * 1000) / spec.ratePerSecond),
    });
  }

  private sweep(now: number, spec: BucketSpec): void {
    const refillMs = (spec.burst * 1000) / spec.ratePerSecond;
    for (const [k, b] of this.buckets) if (now - b.ms > refillMs) this.buckets.delete(k);
  }

  acquireSlot(key: string, member: string, cap: number): Promise<boolean> {
    const held = this.slots.get(key) ?? new Set<string>();
    if (!held.has(member) && held.size >= cap) return Promise.resolve(false);
    held.add(member);
    this.slots.set(key, held);
    return Promise.resolve(true);
  }

  releaseSlot(key: string, member: string): Promise<void> {
    const held = this.slots.get(key);
    held?.delete(member);
    if (held?.size === 0) this.slots.delete(key);
    return Promise.resolve();
  }

  renewSlots(): Promise<void> {
    return Promise.resolve();
  }
}

interface LimitCommands {
  mgBucketTake(key: string, rate: number, burst: number, n: number): Promise<[number, number]>;
  mgSlotTake(key: string, member: string, cap: number, leaseMs: number): Promise<number>;
  mgSlotRenew(key: string, leaseMs: number, ...members: string[]): Promise<number>;
}

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

export class RedisLimitCounters implements LimitCounters {
  private readonly redis: (Redis | Cluster) & LimitCommands;

  constructor(
    client: Redis | Cluster,
    private readonly prefix = 'mg:limits',
  ) {
    this.redis = client as (Redis | Cluster) & LimitCommands;
    this.redis.defineCommand('mgBucketTake', { numberOfKeys: 1, lua: lua('bucket-take') });
    this.redis.defineCommand('mgSlotTake', { numberOfKeys: 1, lua: lua('slot-take') });
    this.redis.defineCommand('mgSlotRenew', { numberOfKeys: 1, lua: lua('slot-renew') });
  }

  async take(key: string, spec: BucketSpec, n = 1): Promise<TakeResult> {
    const [allowed, retry] = await this.redis.mgBucketTake(
      `${this.prefix}:bucket:${key}`,
      spec.ratePerSecond,
      spec.burst,
      n,
    );
    return allowed === 1 ? { allowed: true } : { allowed: false, retryAfterMs: Number(retry) };
  }

  async acquireSlot(key: string, member: string, cap: number, leaseMs: number): Promise<boolean> {
    return (await this.redis.mgSlotTake(`${this.prefix}:slots:${key}`, member, cap, leaseMs)) === 1;
  }

  async releaseSlot(key: string, member: string): Promise<void> {
    await this.redis.zrem(`${this.prefix}:slots:${key}`, member);
  }

  async renewSlots(held: ReadonlyMap<string, readonly string[]>, leaseMs: number): Promise<void> {
    await Promise.all(
      [...held]
        .filter(([, members]) => members.length > 0)
        .map(([key, members]) => this.redis.mgSlotRenew(`${this.prefix}:slots:${key}`, leaseMs, ...members)),
    );
  }
}
