/**
 * Subscriptions on Redis: owned documents (../webhooks/owned-documents.ts: a hash per subscription
 * replaced by one compare-and-set, the per-owner bound exact in one slot) plus the key ring, one
 * JSON value set once (lua/ring.lua).
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { RedisOwnedDocuments } from '../webhooks/owned-documents.js';
import type { KeyRing, SubscriptionDoc, SubscriptionStore } from './types.js';

const RING = readFileSync(new URL('./lua/ring.lua', import.meta.url), 'utf8');

interface RingCommand {
  dsSubRing(...args: string[]): Promise<string>;
}

export class RedisSubscriptionStore
  extends RedisOwnedDocuments<SubscriptionDoc>
  implements SubscriptionStore
{
  private readonly ringRedis: (Redis | Cluster) & RingCommand;

  constructor(client: Redis | Cluster, keyPrefix = 'mg:ds') {
    super(client, `${keyPrefix}:{subs}`);
    this.ringRedis = client as (Redis | Cluster) & RingCommand;
    if (!('dsSubRing' in client)) client.defineCommand('dsSubRing', { numberOfKeys: 1, lua: RING });
  }

  async keyRing(fresh: () => KeyRing): Promise<KeyRing> {
    const stored = await this.redis.get(`${this.prefix}:keyring`);
    if (stored) return JSON.parse(stored) as KeyRing;
    // Two replicas starting at once: the first ring stored wins, the other adopts it.
    return JSON.parse(
      await this.ringRedis.dsSubRing(`${this.prefix}:keyring`, '', JSON.stringify(fresh())),
    ) as KeyRing;
  }

  async replaceKeyRing(expected: KeyRing, next: KeyRing): Promise<boolean> {
    const wrote = JSON.stringify(next);
    return (
      (await this.ringRedis.dsSubRing(`${this.prefix}:keyring`, JSON.stringify(expected), wrote)) === wrote
    );
  }

  async close(): Promise<void> {}
}
