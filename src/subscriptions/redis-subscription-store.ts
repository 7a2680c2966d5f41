/**
 * Subscriptions on Redis: a hash per subscription (`v` version, `doc` JSON) replaced by one Lua
 * compare-and-set (lua/put.lua), so a mutation commits whole and a replica that read an older
 * version is refused. The key ring is one JSON value set once (lua/ring.lua). All keys share one
 * hash tag (one slot on a Cluster), so the per-owner bound is exact.
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type { KeyRing, PutOutcome, SubscriptionDoc, SubscriptionStore, Versioned } from './types.js';

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

interface ScriptCommands {
  dsSubPut(...args: (string | number)[]): Promise<number>;
  dsSubRing(...args: string[]): Promise<string>;
}

export class RedisSubscriptionStore implements SubscriptionStore {
  private readonly prefix: string;
  private readonly redis: (Redis | Cluster) & ScriptCommands;

  constructor(client: Redis | Cluster, keyPrefix = 'mg:ds') {
    this.prefix = `${keyPrefix}:{subs}`;
    this.redis = client as (Redis | Cluster) & ScriptCommands;
    if (!('dsSubPut' in client)) {
      client.defineCommand('dsSubPut', { numberOfKeys: 3, lua: lua('put') });
      client.defineCommand('dsSubRing', { numberOfKeys: 1, lua: lua('ring') });
    }
  }

  private docKey = (key: string): string => `${this.prefix}:doc:${key}`;
  private ownerKey = (owner: string | null): string => `${this.prefix}:owner:${owner ?? ''}`;

  async get(key: string): Promise<Versioned | null> {
    const [v, doc] = await this.redis.hmget(this.docKey(key), 'v', 'doc');
    if (!v || !doc) return null;
    return { doc: JSON.parse(doc) as SubscriptionDoc, version: Number(v) };
  }

  async put(
    key: string,
    expected: number,
    doc: SubscriptionDoc | null,
    maxPerOwner: number,
  ): Promise<PutOutcome> {
    // A delete names the owner's set through the stored doc's owner (the caller read it).
    const owner = doc?.owner ?? (await this.get(key))?.doc.owner ?? null;
    const reply = await this.redis.dsSubPut(
      this.docKey(key),
      `${this.prefix}:all`,
      this.ownerKey(owner),
      expected,
      doc ? JSON.stringify(doc) : '',
      key,
      maxPerOwner,
    );
    if (reply === -1) return { kind: 'moved' };
    if (reply === -2) return { kind: 'owner_full' };
    return { kind: 'written', version: reply };
  }

  async keys(): Promise<string[]> {
    return this.redis.smembers(`${this.prefix}:all`);
  }

  async ownerKeys(owner: string | null): Promise<string[]> {
    return this.redis.smembers(this.ownerKey(owner));
  }

  async keyRing(fresh: () => KeyRing): Promise<KeyRing> {
    const stored = await this.redis.get(`${this.prefix}:keyring`);
    if (stored) return JSON.parse(stored) as KeyRing;
    // Two replicas starting at once: the first ring stored wins, the other adopts it.
    return JSON.parse(
      await this.redis.dsSubRing(`${this.prefix}:keyring`, '', JSON.stringify(fresh())),
    ) as KeyRing;
  }

  async replaceKeyRing(expected: KeyRing, next: KeyRing): Promise<boolean> {
    const wrote = JSON.stringify(next);
    return (await this.redis.dsSubRing(`${this.prefix}:keyring`, JSON.stringify(expected), wrote)) === wrote;
  }

  async close(): Promise<void> {}
}
