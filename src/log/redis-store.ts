/**
 * The Redis Streams log store: per capsule one stream, one meta hash and one short-lived dedup key
 * per writer, all sharing the `{capsule}` hash tag (Cluster-safe: each script touches one slot).
 * Offsets are minted and regressions fenced with a new epoch inside append.lua; batching, outage
 * queueing and retries are the writer's (`log-writer.ts`), periodic age trimming is its owner's.
 */
import { readFileSync } from 'node:fs';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { decodeRecord, encodeEntry, type LogEntry, type LogRecord } from './record.js';
import {
  storeResetFact,
  type AppendOptions,
  type AppendResult,
  type LogPosition,
  type LogStore,
  type ReadResult,
  type RetentionPolicy,
} from './store.js';

export interface RedisStoreOptions {
  retention?: RetentionPolicy;
  /** Key prefix: keys are `<prefix>:{<capsule>}:log`, `…:meta` and `…:w:<writerId>`. */
  keyPrefix?: string;
  /**
   * How long a writer's dedup key (its last batch, for idempotent retries) outlives its last append.
   * Retries happen within seconds; a writer gone for this long (a gateway restart) leaves nothing.
   */
  dedupTtlMs?: number;
  /** A command unanswered this long fails (a frozen Redis keeps TCP open): the writer retries. */
  commandTimeoutMs?: number;
  logger?: Logger;
}

type StreamEntry = [id: string, fields: string[]];
type AppendReply = [epoch: string, applied: number, first: number, count: number];
type ReadReply = [epoch: string, head: string, first: string | null, records: StreamEntry[]];

interface ScriptCommands {
  mgAppend(log: string, meta: string, dedup: string, ...args: (string | number)[]): Promise<AppendReply>;
  mgRead(log: string, meta: string, after: number, limit: number): Promise<ReadReply>;
}

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

const offsetOf = (id: string): number => Number(id.slice(0, id.indexOf('-')));

const decodeEntries = (entries: StreamEntry[]): LogRecord[] =>
  entries.map(([id, fields]) => decodeRecord(fields[1] ?? 'null', offsetOf(id)));

/** Pages scanned per trim() call when looking for the age cut (bounded work per call). */
const TRIM_PAGE = 500;
const TRIM_MAX_PAGES = 50;
/** Idle blocking connections kept for waitAfter. */
const MAX_IDLE_BLOCKERS = 8;

export class RedisStore implements LogStore {
  readonly kind = 'redis' as const;
  private readonly redis: Redis & ScriptCommands;
  private readonly retention: RetentionPolicy;
  private readonly prefix: string;
  private readonly dedupTtlMs: number;
  private readonly idleBlockers: Redis[] = [];
  private readonly activeBlockers = new Set<Redis>();
  private closed = false;

  constructor(url: string, options: RedisStoreOptions = {}) {
    this.retention = options.retention ?? { maxRecords: 0, maxAgeMs: 0 };
    this.prefix = options.keyPrefix ?? 'mg';
    this.dedupTtlMs = options.dedupTtlMs ?? 24 * 60 * 60 * 1000;
    const redisOptions: RedisOptions = {
      // Fail fast while Redis is away: the writer keeps entries queued and retries with backoff.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeout: options.commandTimeoutMs ?? 2000,
      retryStrategy: (times) => Math.min(50 * times, 1000),
      keepAlive: 10_000,
    };
    this.redis = new Redis(url, redisOptions) as Redis & ScriptCommands;
    const logger = options.logger;
    this.redis.on('error', (err: Error) => logger?.debug({ err: err.message }, 'redis error'));
    this.redis.defineCommand('mgAppend', { numberOfKeys: 3, lua: lua('append') });
    this.redis.defineCommand('mgRead', { numberOfKeys: 2, lua: lua('read') });
  }

  /** The capsule's stream and meta keys (exposed for tests and operators). */
  keys(capsule: string): { log: string; meta: string } {
    const base = `${this.prefix}:{${capsule}}`;
    return { log: `${base}:log`, meta: `${base}:meta` };
  }

  /** A writer's dedup key: its own key (with a TTL), no longer a field of the meta hash. */
  dedupKey(capsule: string, writerId: string): string {
    return `${this.prefix}:{${capsule}}:w:${writerId || '-'}`;
  }

  async append(capsule: string, entries: LogEntry[], options: AppendOptions = {}): Promise<AppendResult> {
    const { log, meta } = this.keys(capsule);
    const { batch } = options;
    const args: (string | number)[] = [
      batch?.writerId ?? '',
      batch?.seq ?? 0,
      this.retention.maxRecords,
      Math.max(0, Math.floor(options.floor ?? 0)),
      encodeEntry(options.resetFact ?? storeResetFact()),
      this.dedupTtlMs,
    ];
    for (const entry of entries) args.push(encodeEntry(entry));
    // Not ready → the script was certainly never sent: say so, the writer may re-form the batch.
    await this.ready().catch((err: unknown) => {
      throw this.unavailable(err, true);
    });
    const [epoch, applied, first, count] = await this.call(() =>
      this.redis.mgAppend(log, meta, this.dedupKey(capsule, batch?.writerId ?? ''), ...args),
    );
    const offsets = Array.from({ length: Number(count) }, (_, i) => Number(first) + i);
    switch (Number(applied)) {
      case 1:
        return { offsets, epoch: Number(epoch) };
      case 2:
        return { offsets, epoch: Number(epoch), reset: true };
      default:
        return { offsets: [], epoch: Number(epoch), appliedOffsets: offsets };
    }
  }

  async read(capsule: string, after: number, limit: number): Promise<ReadResult> {
    const { log, meta } = this.keys(capsule);
    const [epoch, head, first, records] = await this.call(() =>
      this.ready().then(() => this.redis.mgRead(log, meta, Math.max(0, after), Math.max(0, limit))),
    );
    const headOffset = Number(head);
    return {
      records: decodeEntries(records),
      position: {
        head: headOffset,
        first: first ? offsetOf(first) : headOffset + 1,
        epoch: Number(epoch),
      },
    };
  }

  async readLast(capsule: string, count: number): Promise<LogRecord[]> {
    if (count <= 0) return [];
    const { log } = this.keys(capsule);
    const entries = (await this.call(() =>
      this.ready().then(() => this.redis.xrevrange(log, '+', '-', 'COUNT', count)),
    )) as StreamEntry[];
    return decodeEntries(entries).reverse();
  }

  async position(capsule: string): Promise<LogPosition> {
    return (await this.read(capsule, 0, 0)).position;
  }

  async waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<ReadResult> {
    const now = await this.read(capsule, after, limit);
    if (now.records.length > 0 || timeoutMs <= 0 || signal?.aborted || this.closed) return now;
    const empty: ReadResult = { records: [], position: now.position };
    const blocker = await this.blocker();
    // The signal may have fired while connecting: a listener added now would never run.
    if (signal?.aborted || this.closed) {
      this.release(blocker);
      return empty;
    }
    let aborted = false;
    const onAbort = (): void => {
      aborted = true;
      blocker.disconnect();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    // XREAD BLOCK cannot be cancelled from this side except by dropping its connection; a frozen
    // Redis would also hold it forever, so a guard timer drops it a little after the deadline.
    let frozen = false;
    const guard = setTimeout(() => {
      frozen = true;
      blocker.disconnect();
    }, timeoutMs + 2000);
    try {
      const { log } = this.keys(capsule);
      // An explicit id (not `$`): a record appended since the read above is returned at once.
      const reply = await blocker.xread(
        'COUNT',
        1,
        'BLOCK',
        Math.ceil(timeoutMs),
        'STREAMS',
        log,
        `${Math.max(0, after)}-0`,
      );
      this.release(blocker);
      if (!reply) return empty;
      return await this.read(capsule, after, limit);
    } catch (err) {
      this.activeBlockers.delete(blocker);
      blocker.disconnect();
      if (aborted || this.closed) return empty;
      throw this.unavailable(frozen ? new Error('redis did not answer XREAD in time') : err);
    } finally {
      clearTimeout(guard);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async trim(capsule: string): Promise<void> {
    const { log } = this.keys(capsule);
    if (this.retention.maxRecords > 0) {
      const max = this.retention.maxRecords;
      await this.call(() => this.ready().then(() => this.redis.xtrim(log, 'MAXLEN', '=', max)));
    }
    if (this.retention.maxAgeMs <= 0) return;
    // Entry ids are offsets, not times: find the first record young enough by its receivedAt and
    // cut just before it (MINID). Work per call is bounded; the next call continues.
    const cutoff = Date.now() - this.retention.maxAgeMs;
    let start = '-';
    let cut: number | null = null;
    for (let page = 0; page < TRIM_MAX_PAGES && cut === null; page++) {
      const entries = (await this.call(() =>
        this.ready().then(() => this.redis.xrange(log, start, '+', 'COUNT', TRIM_PAGE)),
      )) as StreamEntry[];
      if (entries.length === 0) break;
      for (const record of decodeEntries(entries)) {
        if (record.receivedAt >= cutoff) {
          cut = record.offset;
          break;
        }
      }
      const lastOffset = offsetOf(entries[entries.length - 1]?.[0] ?? '0-0');
      if (cut === null) {
        if (entries.length < TRIM_PAGE) cut = lastOffset + 1;
        else if (page === TRIM_MAX_PAGES - 1) cut = lastOffset + 1;
      }
      start = `${lastOffset + 1}-0`;
    }
    if (cut !== null && cut > 1) {
      const minId = `${cut}-0`;
      await this.call(() => this.ready().then(() => this.redis.xtrim(log, 'MINID', minId)));
    }
  }

  async ping(): Promise<boolean> {
    try {
      await this.ready();
      return (await this.redis.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const b of [...this.idleBlockers, ...this.activeBlockers]) b.disconnect();
    this.idleBlockers.length = 0;
    this.activeBlockers.clear();
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  /** Wait briefly for the connection to be ready (start-up, reconnect), else fail fast. */
  private async ready(): Promise<void> {
    if (this.redis.status === 'ready') return;
    if (this.closed) throw new GatewayError('store_unavailable', 'redis store is closed');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.redis.off('ready', onReady);
        reject(new Error(`redis not ready (${this.redis.status})`));
      }, 500);
      const onReady = (): void => {
        clearTimeout(timer);
        resolve();
      };
      this.redis.once('ready', onReady);
    });
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.unavailable(err);
    }
  }

  /**
   * `notSent`: the command certainly never left this process (not connected; ioredis refuses at
   * once without an offline queue). Anything else may have run in Redis without a reply reaching us.
   */
  private unavailable(err: unknown, notSent = false): GatewayError {
    if (err instanceof GatewayError) {
      return notSent && !err.details?.notSent
        ? new GatewayError(err.code, err.message, { ...err.details, notSent: true })
        : err;
    }
    const message = err instanceof Error ? err.message : String(err);
    // ioredis's refusal without an offline queue; "Connection is closed." is NOT one: it also
    // fails commands already written to a socket that then closed.
    const refused = message.startsWith("Stream isn't writeable");
    return new GatewayError(
      'store_unavailable',
      `redis: ${message}`,
      notSent || refused ? { notSent: true } : undefined,
    );
  }

  /** A dedicated connection for one blocking XREAD (never the main one: it would stall appends). */
  private async blocker(): Promise<Redis> {
    const idle = this.idleBlockers.pop();
    if (idle && idle.status === 'ready') {
      this.activeBlockers.add(idle);
      return idle;
    }
    idle?.disconnect();
    const conn = this.redis.duplicate({
      lazyConnect: true,
      enableOfflineQueue: false,
      commandTimeout: undefined,
      retryStrategy: () => null,
    });
    conn.on('error', () => {});
    try {
      await conn.connect();
    } catch (err) {
      conn.disconnect();
      throw this.unavailable(err);
    }
    this.activeBlockers.add(conn);
    return conn;
  }

  private release(conn: Redis): void {
    this.activeBlockers.delete(conn);
    if (this.closed || this.idleBlockers.length >= MAX_IDLE_BLOCKERS) conn.disconnect();
    else this.idleBlockers.push(conn);
  }
}
