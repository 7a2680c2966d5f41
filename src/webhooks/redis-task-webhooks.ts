/**
 * Task webhooks on Redis: a hash per task (`v` version, `doc` JSON) replaced by the same Lua
 * compare-and-set as subscriptions (src/subscriptions/lua/put.lua: version check, owner's share,
 * the set of every key), so a cursor moves in one step and a replica that read an older version
 * is refused. All keys share one hash tag (one slot on a Cluster), so the per-owner bound is exact.
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type {
  TaskWebhookStore,
  TaskWebhooksDoc,
  TaskWebhooksPut,
  VersionedTaskWebhooks,
} from './task-webhooks.js';

const PUT = readFileSync(new URL('../subscriptions/lua/put.lua', import.meta.url), 'utf8');

interface ScriptCommands {
  taskWebhooksPut(...args: (string | number)[]): Promise<number>;
}

export class RedisTaskWebhookStore implements TaskWebhookStore {
  private readonly prefix: string;
  private readonly redis: (Redis | Cluster) & ScriptCommands;

  constructor(client: Redis | Cluster, keyPrefix = 'mg:a2a') {
    this.prefix = `${keyPrefix}:{push}`;
    this.redis = client as (Redis | Cluster) & ScriptCommands;
    if (!('taskWebhooksPut' in client))
      client.defineCommand('taskWebhooksPut', { numberOfKeys: 3, lua: PUT });
  }

  private docKey = (key: string): string => `${this.prefix}:doc:${key}`;
  private ownerKey = (owner: string | null): string => `${this.prefix}:owner:${owner ?? ''}`;

  async get(key: string): Promise<VersionedTaskWebhooks | null> {
    const [v, doc] = await this.redis.hmget(this.docKey(key), 'v', 'doc');
    if (!v || !doc) return null;
    return { doc: JSON.parse(doc) as TaskWebhooksDoc, version: Number(v) };
  }

  async put(
    key: string,
    expected: number,
    doc: TaskWebhooksDoc | null,
    maxPerOwner: number,
  ): Promise<TaskWebhooksPut> {
    // A delete names the owner's set through the stored doc's owner (the caller read it).
    const owner = doc?.owner ?? (await this.get(key))?.doc.owner ?? null;
    const reply = await this.redis.taskWebhooksPut(
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
}
