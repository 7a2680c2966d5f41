/**
 * Claims: a decision that must be taken once across every replica (two replicas receiving the same
 * Idempotency-Key at the same instant), as a key held for a bounded time. Everything else replicas
 * share is derived from the log; this is the one thing the log cannot order, because both replicas
 * check the log BEFORE either has written. Redis: `SET NX PX` on `mg:{capsule}:claim:<sha256>` (the
 * capsule's hash tag: single-slot on a Cluster) and a compare-and-delete release; memory: a map.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

/** A claim this process holds until it releases it or its TTL passes. */
export interface HeldClaim {
  /** Give the claim up (only if still ours); never throws. */
  release(): Promise<void>;
}

export interface ClaimStore {
  /** Take `key` for `capsule` for `ttlMs`, or null when another holder has it. */
  claimOnce(capsule: string, key: string, ttlMs: number): Promise<HeldClaim | null>;
}

export class MemoryClaims implements ClaimStore {
  private readonly held = new Map<string, { value: string; until: number }>();

  claimOnce(capsule: string, key: string, ttlMs: number): Promise<HeldClaim | null> {
    const k = `${capsule}\u0000${key}`;
    const now = Date.now();
    const current = this.held.get(k);
    if (current && current.until > now) return Promise.resolve(null);
    const value = randomUUID();
    this.held.set(k, { value, until: now + ttlMs });
    return Promise.resolve({
      release: () => {
        if (this.held.get(k)?.value === value) this.held.delete(k);
        return Promise.resolve();
      },
    });
  }
}

interface ClaimCommands {
  mgClaimRelease(key: string, value: string): Promise<number>;
}

const releaseLua = readFileSync(new URL('./lua/claim-release.lua', import.meta.url), 'utf8');

export class RedisClaims implements ClaimStore {
  private readonly redis: (Redis | Cluster) & ClaimCommands;

  constructor(
    client: Redis | Cluster,
    private readonly prefix = 'mg',
  ) {
    this.redis = client as (Redis | Cluster) & ClaimCommands;
    this.redis.defineCommand('mgClaimRelease', { numberOfKeys: 1, lua: releaseLua });
  }

  async claimOnce(capsule: string, key: string, ttlMs: number): Promise<HeldClaim | null> {
    // Hashed: a client's key may be long or hold any character; the tag keeps it in the capsule's slot.
    const digest = createHash('sha256').update(key).digest('hex');
    const redisKey = `${this.prefix}:{${capsule}}:claim:${digest}`;
    const value = randomUUID();
    const ok = await this.redis.set(redisKey, value, 'PX', Math.max(1, Math.round(ttlMs)), 'NX');
    if (ok !== 'OK') return null;
    return {
      release: async () => {
        await this.redis.mgClaimRelease(redisKey, value).catch(() => undefined);
      },
    };
  }
}
