/**
 * The Redis Streams log store: per capsule one stream, one meta hash and one short-lived dedup key
 * per writer, all sharing the `{capsule}` hash tag, so on a Cluster every script and command touches
 * one slot (one node). Works the same on one Redis, Sentinel or Cluster (`redis-connection.ts`).
 * Offsets are minted and regressions fenced with a new epoch inside append.lua; batching, outage
 * queueing and retries are the writer's (`log-writer.ts`), periodic age trimming is its owner's.
 */
import { readFileSync } from 'node:fs';
import { Redis, type Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConfig } from '../config/schema.js';
import { GatewayError } from '../errors.js';
import { decodeRecord, encodeEntry, recordOf, type LogEntry, type LogRecord } from './record.js';
import { OwnTails } from './own-tail.js';
import { RedisConnection } from './redis-connection.js';
import {
  isStoreReset,
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

const isMissingFact = (e: LogEntry): boolean => e.kind === 'fact' && e.fact === 'frames-possibly-missing';

/** The index in append.lua's ARGV (0-based here) of its checkRun flag; the entries follow it. */
const CHECK_RUN_ARG = 9;
/** A tail awaits this process's next append locally when it appended within OWN_RECENT_MS... */
const OWN_RECENT_MS = 100;
/** ...for at most this long before asking Redis (another replica's records wait no longer). */
const OWN_WAIT_MS = 50;

type Moved = { movedTo: string };
const isMoved = (woke: StreamEntry[] | false | Moved): woke is Moved =>
  woke !== false && !Array.isArray(woke);

const offsetOf = (id: string): number => Number(id.slice(0, id.indexOf('-')));

const decodeEntries = (entries: StreamEntry[]): LogRecord[] =>
  entries.map(([id, fields]) => decodeRecord(fields[1] ?? 'null', offsetOf(id)));

/** Pages scanned per trim() call when looking for the age cut (bounded work per call). */
const TRIM_PAGE = 500;
const TRIM_MAX_PAGES = 50;
/** `MOVED <slot> <host:port>`: on a Cluster, the slot changed owner since the slot map was read. */
const movedTo = (err: unknown): string | null => {
  const match = err instanceof Error ? /^MOVED \d+ (\S+)/.exec(err.message) : null;
  return match?.[1] ?? null;
};

export class RedisStore implements LogStore {
  readonly kind = 'redis' as const;
  /** The connection (one Redis, Sentinel or Cluster); closed by close() only when this store made it. */
  readonly connection: RedisConnection;
  private readonly ownsConnection: boolean;
  private readonly redis: (Redis | Cluster) & ScriptCommands;
  private readonly retention: RetentionPolicy;
  private readonly prefix: string;
  private readonly dedupTtlMs: number;
  private closed = false;
  /** Whether an append on the current connection already compared Redis's run id (append.lua checkRun). */
  private runChecked = false;
  private readonly alwaysCheckRun: boolean;
  /** This process's own appends, for its own tail (own-tail.ts). */
  private readonly own = new OwnTails();
  /** Per capsule: the offset the last waitAfter answer with records ended at. */
  private readonly tailAt = new Map<string, number>();
  /** Per capsule: the epoch and first offset of the last read.lua answer (see pageFromWake). */
  private readonly lastRead = new Map<string, { epoch: number; first: number }>();

  /** `redis`: a configuration (URL, `{sentinels, name}`, `{cluster}`) or a connection shared with others. */
  constructor(redis: RedisConfig | RedisConnection, options: RedisStoreOptions = {}) {
    this.retention = options.retention ?? { maxRecords: 0, maxAgeMs: 0 };
    this.prefix = options.keyPrefix ?? 'mg';
    this.dedupTtlMs = options.dedupTtlMs ?? 24 * 60 * 60 * 1000;
    this.ownsConnection = !(redis instanceof RedisConnection);
    this.connection =
      redis instanceof RedisConnection
        ? redis
        : new RedisConnection(redis, { commandTimeoutMs: options.commandTimeoutMs, logger: options.logger });
    this.redis = this.connection.client as (Redis | Cluster) & ScriptCommands;
    // Idempotent per client: a shared connection gets the same definitions again.
    this.redis.defineCommand('mgAppend', { numberOfKeys: 3, lua: lua('append') });
    this.redis.defineCommand('mgRead', { numberOfKeys: 2, lua: lua('read') });
    // A restart (or a failover) of Redis drops the connection: the first append after any (re)connect
    // checks the run id again. A Cluster's nodes fail over under one client object, so it always checks.
    this.alwaysCheckRun = !(this.redis instanceof Redis);
    this.redis.on('ready', () => (this.runChecked = false));
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
      options.fence === undefined ? '' : String(Math.floor(options.fence)),
      this.retention.maxBytes ?? 0,
      entries.filter(isMissingFact).length,
      '', // checkRun, decided once connected (below)
    ];
    for (const entry of entries) args.push(encodeEntry(entry));
    // Not ready → the script was certainly never sent: say so, the writer may re-form the batch.
    await this.ready().catch((err: unknown) => {
      throw this.unavailable(err, true);
    });
    // After the wait: a reconnect while this append waited for one must make it check the run id.
    args[CHECK_RUN_ARG] = this.alwaysCheckRun || !this.runChecked ? '1' : '';
    const [epoch, applied, first, count] = await this.call(() =>
      this.redis.mgAppend(log, meta, this.dedupKey(capsule, batch?.writerId ?? ''), ...args),
    );
    this.runChecked = true;
    const offsets = Array.from({ length: Number(count) }, (_, i) => Number(first) + i);
    switch (Number(applied)) {
      case 1:
        this.own.note(
          capsule,
          Number(epoch),
          offsets.map((offset, i) => recordOf(entries[i]!, args[CHECK_RUN_ARG + 1 + i] as string, offset)),
        );
        return { offsets, epoch: Number(epoch) };
      case 2:
        this.own.forget(capsule);
        return { offsets, epoch: Number(epoch), reset: true };
      default:
        this.own.forget(capsule);
        return { offsets: [], epoch: Number(epoch), appliedOffsets: offsets };
    }
  }

  async read(capsule: string, after: number, limit: number): Promise<ReadResult> {
    const { log, meta } = this.keys(capsule);
    const [epoch, head, first, records] = await this.call(() =>
      this.ready().then(() => this.redis.mgRead(log, meta, Math.max(0, after), Math.max(0, limit))),
    );
    const headOffset = Number(head);
    const position = {
      head: headOffset,
      first: first ? offsetOf(first) : headOffset + 1,
      epoch: Number(epoch),
    };
    this.lastRead.set(capsule, { epoch: position.epoch, first: position.first });
    return { records: decodeEntries(records), position };
  }

  async possiblyMissing(capsule: string): Promise<number> {
    const { meta } = this.keys(capsule);
    const count = await this.call(() => this.ready().then(() => this.redis.hget(meta, 'missing')));
    return Number(count ?? 0);
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
    // A caller asking again from exactly where the last answer ended (the hub's tail loop) was at
    // the head as of that read: it blocks first, and XREAD answers at once if records came since.
    // That leaves two Redis calls per wake instead of three, which is most of a busy capsule's tail
    // traffic. After an error (or any other cursor) the read comes first, as before, so a log that
    // went backwards is seen at once.
    const atHead = this.tailAt.get(capsule) === after;
    this.tailAt.delete(capsule);
    if (atHead) {
      // What this process appended next is the page, without a Redis call. While it keeps
      // appending frames here (it ingests the capsule), its next append (milliseconds away on a
      // busy capsule) is awaited locally first: another replica's record (a submission) then waits
      // at most OWN_WAIT_MS for the XREAD. A replica that appended only a submission or a surface
      // record reads the XREAD at once: the reply's frames are the owner's (own-tail.ts).
      const own = this.ownPage(capsule, after, limit);
      if (own) return this.noteTail(capsule, own);
      // An append's answer can come after an XREAD that already served its records (Redis answers
      // the blocked reader first): that append wakes this wait with nothing new. Waiting for the
      // next one (within the same bound) keeps the tail on its own appends; taking the XREAD there
      // put it back on one XREAD per append for good.
      const until = Date.now() + Math.min(OWN_WAIT_MS, timeoutMs);
      while (timeoutMs > 0 && this.own.appendedWithin(capsule, OWN_RECENT_MS) && !signal?.aborted) {
        const left = until - Date.now();
        if (left <= 0) break;
        await this.own.next(capsule, left, signal);
        const next = this.ownPage(capsule, after, limit);
        if (next) return this.noteTail(capsule, next);
      }
    }
    let empty: ReadResult | null = null;
    if (!atHead) {
      const now = await this.read(capsule, after, limit);
      if (now.records.length > 0 || timeoutMs <= 0 || signal?.aborted || this.closed)
        return this.noteTail(capsule, now);
      empty = { records: [], position: now.position };
    }
    const { log } = this.keys(capsule);
    let woke = await this.blockingRead(log, after, limit, timeoutMs, signal);
    // On a Cluster the slot moved since the slot map was read: the reply names the new owner.
    if (isMoved(woke)) {
      this.connection.refreshTopology();
      woke = await this.blockingRead(log, after, limit, timeoutMs, signal, woke.movedTo);
    }
    if (isMoved(woke) || woke === false) {
      if (empty) return empty;
    } else {
      const page = this.pageFromWake(capsule, after, limit, woke);
      if (page) return this.noteTail(capsule, page);
    }
    return this.noteTail(capsule, await this.read(capsule, after, limit));
  }

  /** Our own next records after `after` as a page (see pageFromWake for the position), or null. */
  private ownPage(capsule: string, after: number, limit: number): ReadResult | null {
    const known = this.lastRead.get(capsule);
    const records = known ? this.own.page(capsule, after, limit, known.epoch) : null;
    if (!known || !records || records.length === 0 || records.length >= limit) return null;
    return { records, position: this.positionAt(known, records[records.length - 1]!.offset) };
  }

  /** The position of a page ending at `head` (the head then), from the last read's epoch and first. */
  private positionAt(known: { epoch: number; first: number }, head: number): LogPosition {
    const { maxRecords } = this.retention;
    const first = maxRecords > 0 ? Math.max(known.first, head - maxRecords + 1) : known.first;
    return { head, first, epoch: known.epoch };
  }

  /**
   * The XREAD that woke a tail is the page itself when it is plainly the next one: the records
   * after `after`, contiguous, no store-reset among them, fewer than `limit` (so the last is the
   * head). Its position is the last read's epoch (a new epoch always opens with a store-reset
   * fact) and first (raised by count retention). Saves read.lua per wake, a third of the Redis
   * calls of a busy capsule. Anything else (a trim under the cursor, a new epoch, a full page) is
   * read again by read.lua, which reports the position atomically.
   */
  private pageFromWake(
    capsule: string,
    after: number,
    limit: number,
    entries: StreamEntry[],
  ): ReadResult | null {
    const known = this.lastRead.get(capsule);
    if (!known || entries.length === 0 || entries.length >= limit) return null;
    const records = decodeEntries(entries);
    let next = after + 1;
    for (const record of records) {
      if (record.offset !== next || isStoreReset(record)) return null;
      next++;
    }
    return { records, position: this.positionAt(known, next - 1) };
  }

  /** Remember where an answer with records ended (see waitAfter). */
  private noteTail(capsule: string, result: ReadResult): ReadResult {
    const last = result.records[result.records.length - 1];
    if (last) this.tailAt.set(capsule, last.offset);
    return result;
  }

  /**
   * XREAD BLOCK on a connection of its own (never the shared one: it would stall appends; on a
   * Cluster, one to the node owning the log's slot). The entries after `after` (up to `limit`)
   * when some came, false on timeout or abort, `{movedTo}` when a Cluster answered MOVED.
   */
  private async blockingRead(
    log: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    node?: string,
  ): Promise<StreamEntry[] | false | Moved> {
    let blocker: Redis;
    try {
      blocker = await this.connection.acquireBlocking(log, node);
    } catch (err) {
      throw this.unavailable(err);
    }
    // The signal may have fired while connecting: a listener added now would never run.
    if (signal?.aborted || this.closed) {
      this.connection.release(blocker);
      return false;
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
      // An explicit id (not `$`): a record appended since the caller's read is returned at once.
      const reply = await blocker.xread(
        'COUNT',
        Math.max(1, limit),
        'BLOCK',
        Math.ceil(timeoutMs),
        'STREAMS',
        log,
        `${Math.max(0, after)}-0`,
      );
      this.connection.release(blocker);
      return reply?.[0]?.[1] ?? false;
    } catch (err) {
      const moved = movedTo(err);
      // A MOVED reply leaves the connection sound, but it serves the slot no more: not kept.
      this.connection.drop(blocker);
      if (aborted || this.closed) return false;
      if (moved && node === undefined) return { movedTo: moved };
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

  async sharedSecret(name: string, candidate: string): Promise<string> {
    return this.call(async () => {
      await this.ready();
      // SET NX: the first replica's candidate wins; every replica then reads the same value.
      await this.redis.set(name, candidate, 'NX');
      return (await this.redis.get(name)) ?? candidate;
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.ownsConnection) await this.connection.close();
  }

  /** The wait for 'ready' that every call shares while the connection is not ready. */
  private readyWait: Promise<void> | null = null;

  /**
   * Wait briefly for the connection to be ready (start-up, reconnect), else fail fast. One listener
   * for every call that waits (each capsule's reads and appends at start-up), not one each.
   */
  private async ready(): Promise<void> {
    if (this.redis.status === 'ready') return;
    if (this.closed) throw new GatewayError('store_unavailable', 'redis store is closed');
    this.readyWait ??= new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.redis.off('ready', onReady);
        this.readyWait = null;
        reject(new Error(`redis not ready (${this.redis.status})`));
      }, 500);
      const onReady = (): void => {
        clearTimeout(timer);
        this.readyWait = null;
        resolve();
      };
      this.redis.once('ready', onReady);
    });
    return this.readyWait;
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
    if (err instanceof Error && err.message.startsWith('FENCED')) {
      // Certainly applied nothing: a definite refusal, never retried as is.
      return new GatewayError('store_unavailable', `redis: ${err.message}`, { fenced: true, notSent: true });
    }
    if (err instanceof GatewayError) {
      return notSent && !err.details?.notSent
        ? new GatewayError(err.code, err.message, { ...err.details, notSent: true })
        : err;
    }
    const message = err instanceof Error ? err.message : String(err);
    // ioredis's refusals without an offline queue (a Redis; a Cluster not ready); "Connection is
    // closed." is NOT one: it also fails commands already written to a socket that then closed.
    const refused = message.startsWith("Stream isn't writeable") || message.startsWith("Cluster isn't ready");
    return new GatewayError(
      'store_unavailable',
      `redis: ${message}`,
      notSent || refused ? { notSent: true } : undefined,
    );
  }
}
