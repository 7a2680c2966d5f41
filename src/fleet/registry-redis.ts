/**
 * The capsule registry in Redis: a hash `mg:fleet:capsules` (id → JSON entry) and a pub/sub channel
 * `mg:fleet:capsules:changed` that every change is announced on. A replica re-reads the hash on a
 * notification and every `resyncMs` anyway (a notification sent while its subscriber reconnected is
 * lost; the resync bounds how stale it can be). One key, so it works alike on one Redis, Sentinel
 * and Cluster, through the store's own connection plus one subscriber duplicated from it.
 */
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConnection } from '../log/redis-connection.js';
import {
  ChangeFanout,
  parseStoredEntry,
  type CapsuleEntries,
  type CapsuleEntry,
  type CapsuleRegistry,
} from './registry.js';

export interface RedisCapsuleRegistryOptions {
  /** The hash; the channel is `<key>:changed`. Tests give each fleet its own. */
  key?: string;
  /** Safety-net re-read interval (default 5000 ms). */
  resyncMs?: number;
  logger?: Logger;
}

const DEFAULT_REGISTRY_KEY = 'mg:fleet:capsules';

export class RedisCapsuleRegistry implements CapsuleRegistry {
  private readonly key: string;
  private readonly channel: string;
  private readonly client: Redis | Cluster;
  private readonly fanout = new ChangeFanout();
  private subscriber: Redis | Cluster | null = null;
  private timer: NodeJS.Timeout | null = null;
  private seed: Map<string, { url: string; doorToken?: string }> | null = null;
  private refreshing: Promise<void> | null = null;
  private again = false;
  private closed = false;

  constructor(
    connection: RedisConnection,
    private readonly options: RedisCapsuleRegistryOptions = {},
  ) {
    this.key = options.key ?? DEFAULT_REGISTRY_KEY;
    this.channel = `${this.key}:changed`;
    this.client = connection.client;
  }

  start(seed: Map<string, { url: string; doorToken?: string }>): void {
    this.seed = seed.size > 0 ? seed : null;
    // Its own connection: a subscribed connection can run nothing else. Queue the SUBSCRIBE until
    // it connects (the store's client fails fast instead, which suits appends, not this).
    // No autoResubscribe: the 'ready' handler below subscribes again itself, and ioredis's own
    // resubscribe leaves its promise unhandled, so a connection that closes right after a reconnect
    // raised an unhandled "Connection is closed." rejection (seen once in a CI run of ops.test.ts).
    const overrides = { enableOfflineQueue: true, lazyConnect: false, autoResubscribe: false };
    const sub =
      this.client instanceof Cluster
        ? this.client.duplicate(undefined, { enableOfflineQueue: true })
        : this.client.duplicate(overrides);
    this.subscriber = sub;
    sub.on('error', (err: Error) => this.options.logger?.debug({ err: err.message }, 'registry subscriber'));
    sub.on('message', (channel: string) => {
      if (channel === this.channel) this.refresh();
    });
    // After every (re)connect: subscribe again and catch up on what was missed meanwhile.
    sub.on('ready', () => {
      sub.subscribe(this.channel).then(
        () => this.refresh(),
        () => {},
      );
    });
    this.timer = setInterval(() => this.refresh(), this.options.resyncMs ?? 5_000);
    this.timer.unref();
    this.refresh();
  }

  async list(): Promise<CapsuleEntries> {
    await this.ready();
    const raw = await this.client.hgetall(this.key);
    const entries: CapsuleEntries = new Map();
    for (const id of Object.keys(raw).sort()) {
      const entry = parseStoredEntry(id, raw[id]!);
      if (entry) entries.set(id, entry);
      else this.options.logger?.warn({ id }, 'registry: unreadable entry skipped');
    }
    return entries;
  }

  async get(id: string): Promise<CapsuleEntry | null> {
    await this.ready();
    const raw = await this.client.hget(this.key, id);
    return raw === null ? null : parseStoredEntry(id, raw);
  }

  async put(id: string, entry: CapsuleEntry): Promise<{ created: boolean }> {
    await this.ready();
    const added = await this.client.hset(this.key, id, JSON.stringify(entry));
    await this.announce();
    return { created: added === 1 };
  }

  async remove(id: string): Promise<boolean> {
    await this.ready();
    const removed = await this.client.hdel(this.key, id);
    if (removed > 0) await this.announce();
    return removed > 0;
  }

  onChange(listener: (entries: CapsuleEntries) => void): () => void {
    return this.fanout.add(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.refreshing?.catch(() => {});
    const sub = this.subscriber;
    this.subscriber = null;
    if (sub) await sub.quit().catch(() => sub.disconnect());
  }

  /** The store's client fails fast while not connected: at start-up, wait briefly for it. */
  private async ready(): Promise<void> {
    if (this.client.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.client.off('ready', onReady);
        reject(new Error(`redis not ready (${this.client.status})`));
      }, 1_000);
      const onReady = (): void => {
        clearTimeout(timer);
        resolve();
      };
      this.client.once('ready', onReady);
    });
  }

  /** Tell every replica (this one too: it applies the change without waiting on the channel). */
  private async announce(): Promise<void> {
    this.refresh();
    // The change is stored; a lost notification is caught by the next resync, so not an error.
    await this.client.publish(this.channel, '1').catch(() => {});
  }

  /** Re-read the hash and emit; coalesced, so emissions follow the store's order. */
  private refresh(): void {
    if (this.closed) return;
    if (this.refreshing) {
      this.again = true;
      return;
    }
    this.refreshing = (async () => {
      do {
        this.again = false;
        try {
          if (this.seed) await this.seedOnce(this.seed);
          const entries = await this.list();
          if (!this.closed) this.fanout.emit(entries);
        } catch (err) {
          // Redis away: the replica keeps serving the set it has; the next resync tries again.
          this.options.logger?.debug({ err: (err as Error).message }, 'registry: sync failed');
          break;
        }
      } while (this.again && !this.closed);
    })().finally(() => {
      this.refreshing = null;
    });
  }

  /** Config entries are upserted once per start (config wins for the ids it names). */
  private async seedOnce(seed: Map<string, { url: string; doorToken?: string }>): Promise<void> {
    await this.ready();
    const now = Date.now();
    const fields: string[] = [];
    for (const [id, c] of seed) fields.push(id, JSON.stringify({ ...c, source: 'config', updatedAt: now }));
    await this.client.hset(this.key, ...fields);
    this.seed = null;
    await this.client.publish(this.channel, '1').catch(() => {});
  }
}
