/**
 * Documents that belong to an owner, each replaced whole by compare-and-set on its version, with a
 * bound on how many one owner holds: what the Durable Streams subscriptions and the A2A task
 * webhooks both keep. In memory (the embedded store: nothing survives a restart), or on Redis as a
 * hash per document (`v` version, `doc` JSON) replaced by one Lua script (lua/put.lua), so a
 * mutation commits whole and a replica that read an older version is refused. A Redis set's keys
 * share one hash tag (one slot on a Cluster), so the per-owner bound is exact.
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

export interface OwnedDoc {
  owner?: string | null;
}

export interface VersionedDoc<D> {
  doc: D;
  version: number;
}

export type DocPut =
  | { kind: 'written'; version: number }
  /** Someone else wrote it since it was read: read again. */
  | { kind: 'moved' }
  /** A create past the owner's share (`maxPerOwner`). */
  | { kind: 'owner_full' };

export interface OwnedDocuments<D extends OwnedDoc> {
  get(key: string): Promise<VersionedDoc<D> | null>;
  /**
   * Writes `doc` (null: deletes) if the stored version is still `expected` (0: absent). A create
   * counts against the owner's share (`maxPerOwner`); a delete frees it.
   */
  put(key: string, expected: number, doc: D | null, maxPerOwner: number): Promise<DocPut>;
  /** Every document's key (the sweeps walk them). */
  keys(): Promise<string[]>;
  /** One owner's document keys. */
  ownerKeys(owner: string | null): Promise<string[]>;
}

export class MemoryOwnedDocuments<D extends OwnedDoc> implements OwnedDocuments<D> {
  // JSON, not the object: a caller mutating its doc afterwards changes nothing stored.
  private readonly docs = new Map<string, { json: string; version: number; owner: string }>();

  async get(key: string): Promise<VersionedDoc<D> | null> {
    const entry = this.docs.get(key);
    return entry ? { doc: JSON.parse(entry.json) as D, version: entry.version } : null;
  }

  async put(key: string, expected: number, doc: D | null, maxPerOwner: number): Promise<DocPut> {
    const current = this.docs.get(key);
    if ((current?.version ?? 0) !== expected) return { kind: 'moved' };
    if (doc === null) {
      this.docs.delete(key);
      return { kind: 'written', version: 0 };
    }
    const owner = doc.owner ?? '';
    if (!current && [...this.docs.values()].filter((d) => d.owner === owner).length >= maxPerOwner)
      return { kind: 'owner_full' };
    this.docs.set(key, { json: JSON.stringify(doc), version: expected + 1, owner });
    return { kind: 'written', version: expected + 1 };
  }

  async keys(): Promise<string[]> {
    return [...this.docs.keys()];
  }

  async ownerKeys(owner: string | null): Promise<string[]> {
    return [...this.docs].filter(([, d]) => d.owner === (owner ?? '')).map(([k]) => k);
  }
}

const PUT = readFileSync(new URL('./lua/put.lua', import.meta.url), 'utf8');

interface PutCommand {
  ownedDocPut(...args: (string | number)[]): Promise<number>;
}

export class RedisOwnedDocuments<D extends OwnedDoc> implements OwnedDocuments<D> {
  protected readonly redis: (Redis | Cluster) & PutCommand;

  /** `prefix` holds its hash tag (`mg:ds:{subs}`): every key of one set in one slot. */
  constructor(
    client: Redis | Cluster,
    protected readonly prefix: string,
  ) {
    this.redis = client as (Redis | Cluster) & PutCommand;
    if (!('ownedDocPut' in client)) client.defineCommand('ownedDocPut', { numberOfKeys: 3, lua: PUT });
  }

  private docKey = (key: string): string => `${this.prefix}:doc:${key}`;
  private ownerKey = (owner: string | null): string => `${this.prefix}:owner:${owner ?? ''}`;

  async get(key: string): Promise<VersionedDoc<D> | null> {
    const [v, doc] = await this.redis.hmget(this.docKey(key), 'v', 'doc');
    if (!v || !doc) return null;
    return { doc: JSON.parse(doc) as D, version: Number(v) };
  }

  async put(key: string, expected: number, doc: D | null, maxPerOwner: number): Promise<DocPut> {
    // A delete names the owner's set through the stored doc's owner (the caller read it).
    const owner = doc?.owner ?? (await this.get(key))?.doc.owner ?? null;
    const reply = await this.redis.ownedDocPut(
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
}
