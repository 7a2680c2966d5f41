/**
 * General streams on Redis: every replica serves every stream. Each mutation is one Lua script
 * (src/streams/lua), so the messages, the producer state, Stream-Seq, the tail and a close commit
 * together or not at all. Waiters are woken through pub/sub from whichever replica appended.
 * All keys share one hash tag, so the stream-count bound is exact (one slot on a Cluster).
 */
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisConnection } from '../log/redis-connection.js';
import { forkSpecOf, MAX_FORK_DEPTH, TOO_DEEP } from './forks.js';
import { MessageCache } from './message-cache.js';
import { StreamWaiters } from './waiters.js';
import type {
  AppendInput,
  AppendResult,
  CreateResult,
  DeleteResult,
  EpochAlias,
  ForkRequest,
  ReadResult,
  StreamBounds,
  StreamConfig,
  StreamMeta,
  StreamStore,
  WaitOutcome,
} from './types.js';

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');
/** Each script with lib.lua before it: the functions they share (an EVAL script cannot include another). */
const withLib = (name: string): string => `${lua('lib')}\n${lua(name)}`;

type Arg = string | number | Buffer;
type Reply = (Buffer | string)[];
interface ScriptCommands {
  dsCreateBuffer(...args: Arg[]): Promise<Reply>;
  dsForkBuffer(...args: Arg[]): Promise<Reply>;
  dsReap(...args: Arg[]): Promise<number>;
  dsAppendBuffer(...args: Arg[]): Promise<Reply>;
  dsReadBuffer(...args: Arg[]): Promise<Reply>;
  dsDelete(...args: Arg[]): Promise<string>;
}

/** An append waiting for its stream's call in flight (RedisStreamStore.append). */
interface QueuedAppend {
  input: AppendInput;
  resolve: (result: AppendResult) => void;
  reject: (err: unknown) => void;
}

/** One script call carries at most this many appends, and this many message bytes past its first. */
const MAX_BATCH_APPENDS = 64;
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** The appends at the head of `queued` that go in one call (at least one). */
const takeBatch = (queued: QueuedAppend[]): QueuedAppend[] => {
  let bytes = 0;
  let n = 0;
  for (const { input } of queued) {
    for (const entry of input.entries) bytes += entry.length;
    if (n > 0 && (n === MAX_BATCH_APPENDS || bytes > MAX_BATCH_BYTES)) break;
    n++;
  }
  return queued.slice(0, n);
};

/** A read at least this many messages behind the last tail seen takes the plain XRANGE page (readPlain). */
const PLAIN_READ_FROM = 64;
/** The read cache's budget when the options give none (config `durableStreams.readCacheBytes`). */
export const DEFAULT_READ_CACHE_BYTES = 64 * 1024 * 1024;

const INFO_SCRIPT = "return redis.call('INFO', 'server')";

/** Positions this process handed out, per path, kept for at most this many streams. */
const MAX_HIGH_WATER = 100_000;
/** Expired streams nobody touches are reaped this often, this many at a time (reap.lua). */
const REAP_MS = 30_000;
const REAP_BATCH = 200;

export interface RedisStreamStoreOptions {
  bounds: StreamBounds;
  /** Key prefix; tests isolate themselves with their own. */
  keyPrefix?: string;
  /** Bytes of messages this replica keeps for reads (message-cache.ts); 0: none. */
  readCacheBytes?: number;
  logger?: Logger;
}

const text = (v: Buffer | string | undefined): string => (v === undefined ? '' : v.toString());

/** `epoch:upTo;...` as the scripts store a fork's aliases. */
const aliasesOf = (raw: string): EpochAlias[] =>
  raw === ''
    ? []
    : raw.split(';').map((a) => {
        const [epoch, upTo] = a.split(':');
        return { epoch: Number(epoch), upTo: Number(upTo) };
      });

/** The nine meta fields every script answers after its verdict. */
const META_FIELDS = 9;
const metaOf = (r: Reply, at = 1): StreamMeta => {
  const ttl = text(r[at + 1]);
  const exp = text(r[at + 2]);
  const expms = text(r[at + 3]);
  return {
    contentType: text(r[at]),
    ttlSeconds: ttl === '' ? null : Number(ttl),
    expiresAt: exp === '' ? null : exp,
    expiresAtMs: expms === '' ? null : Number(expms),
    closed: text(r[at + 4]) === '1',
    epoch: Number(text(r[at + 5])),
    tail: Number(text(r[at + 6])),
    gone: text(r[at + 7]) === '1',
    aliases: aliasesOf(text(r[at + 8])),
  };
};

export class RedisStreamStore implements StreamStore {
  private readonly redis: (Redis | Cluster) & ScriptCommands;
  private readonly subscriber: Redis | Cluster;
  private readonly waiters = new StreamWaiters();
  private readonly highWater = new Map<string, { epoch: number; tail: number }>();
  /** Messages this replica read or appended, per stream and epoch: a page found whole here is not read again. */
  private readonly cache: MessageCache;
  /** Streams with an append call in flight, and the appends queued behind it. */
  private readonly appending = new Map<string, QueuedAppend[]>();
  /** append.lua calls made so far (each carries one or more appends). */
  appendCalls = 0;
  private readonly prefix: string;
  private readonly channel: string;
  /** The followers' generation: in the streams' slot, so append.lua reads it on a Cluster too. */
  private readonly followersKey: string;
  private runId: Promise<string>;
  private closed = false;
  private readonly reaper: NodeJS.Timeout;

  constructor(
    connection: RedisConnection,
    private readonly options: RedisStreamStoreOptions,
  ) {
    this.prefix = `${options.keyPrefix ?? 'mg:ds'}:{streams}`;
    this.channel = `${this.prefix}:wake`;
    this.followersKey = `${this.prefix}:followers`;
    this.redis = connection.client as (Redis | Cluster) & ScriptCommands;
    this.cache = new MessageCache(options.readCacheBytes ?? DEFAULT_READ_CACHE_BYTES);
    for (const [command, script] of [
      ['dsCreate', 'create'],
      ['dsFork', 'fork'],
      ['dsAppend', 'append'],
      ['dsRead', 'read'],
      ['dsDelete', 'delete'],
      ['dsReap', 'reap'],
    ] as const) {
      this.redis.defineCommand(command, { numberOfKeys: 4, lua: withLib(script) });
    }
    // Forks carry no Redis key expiry (lib.lua): expired ones nobody reads are reaped here.
    this.reaper = setInterval(() => {
      this.redis.dsReap(...this.keys(''), REAP_BATCH).catch((err: unknown) => {
        options.logger?.debug({ err: String(err) }, 'general stream reap');
      });
    }, REAP_MS);
    this.reaper.unref();
    // A restart or failover of Redis drops the connection: its run id is read again before any
    // script runs on the new one (the scripts fence a stream whose last touch saw another run id).
    this.runId = this.readRunId();
    this.redis.on('ready', () => (this.runId = this.readRunId()));
    // Subscribing blocks a connection: one of its own, queueing until connected.
    this.subscriber = (this.redis as Redis).duplicate({ enableOfflineQueue: true });
    this.subscriber.on('message', (_channel: string, path: string) => this.waiters.wake(path));
    this.subscriber.on('error', (err: Error) =>
      options.logger?.debug({ err: err.message }, 'stream wake channel'),
    );
    void this.subscriber.subscribe(this.channel).catch((err: unknown) => {
      options.logger?.warn({ err: String(err) }, 'stream wake channel: subscribe failed');
    });
  }

  private async readRunId(): Promise<string> {
    while (!this.closed) {
      try {
        // Through a script on one of the streams' keys: on a Cluster, the node that holds them.
        const info = (await this.redis.eval(INFO_SCRIPT, 1, `${this.prefix}:index`)) as string;
        return /run_id:(\w+)/.exec(info)?.[1] ?? '';
      } catch {
        // Not connected yet: the next 'ready' starts a fresh read; this one retries meanwhile.
        await new Promise((r) => setTimeout(r, 100).unref());
      }
    }
    return '';
  }

  private keys(path: string): string[] {
    return [
      `${this.prefix}:m:${path}`,
      `${this.prefix}:d:${path}`,
      `${this.prefix}:p:${path}`,
      `${this.prefix}:index`,
    ];
  }

  private floor(path: string): [number, number] {
    const hw = this.highWater.get(path);
    return hw ? [hw.epoch, hw.tail] : [-1, 0];
  }

  /**
   * Remember the furthest position handed out for `path`: Redis answering below it is a regression.
   * The cache keeps the stream's messages of this epoch only.
   */
  private saw(path: string, meta: StreamMeta): StreamMeta {
    this.cache.epochIs(path, meta.epoch);
    const hw = this.highWater.get(path);
    if (!hw || meta.epoch > hw.epoch || (meta.epoch === hw.epoch && meta.tail > hw.tail)) {
      this.highWater.delete(path);
      if (this.highWater.size >= MAX_HIGH_WATER) {
        // Without its floor, a stream's regression would go unfenced here: its cached messages go too.
        const oldest = this.highWater.keys().next().value!;
        this.highWater.delete(oldest);
        this.cache.drop(oldest);
      }
      this.highWater.set(path, { epoch: meta.epoch, tail: meta.tail });
    }
    return meta;
  }

  /** The stream is gone from Redis (or soft-deleted): nothing cached of it is served again. */
  private missing(path: string): null {
    this.cache.drop(path);
    return null;
  }

  async create(
    path: string,
    config: StreamConfig,
    initial: Buffer[],
    fork?: ForkRequest,
    owner: string | null = null,
  ): Promise<CreateResult> {
    const common = [
      ...this.keys(path),
      path,
      config.contentType,
      config.ttlSeconds === null ? '' : String(config.ttlSeconds),
      config.expiresAt ?? '',
      config.ttlSeconds === null ? '' : String(config.ttlSeconds * 1000),
      config.expiresAt === null ? '' : String(Date.parse(config.expiresAt)),
      config.closed ? '1' : '0',
      this.options.bounds.maxStreams,
      this.floor(path)[0],
      await this.runId,
      owner ?? '',
      this.options.bounds.maxStreamsPerOwner ?? 0,
    ];
    const reply = fork
      ? await this.redis.dsForkBuffer(
          ...common,
          fork.source,
          fork.offset ? String(fork.offset.epoch) : '',
          fork.offset ? String(fork.offset.position) : '0',
          fork.subOffset,
          forkSpecOf(fork),
          fork.inheritContentType ? '1' : '0',
          fork.inheritExpiry ? '1' : '0',
          MAX_FORK_DEPTH,
          TOO_DEEP,
          ...initial,
        )
      : await this.redis.dsCreateBuffer(...common, ...initial);
    const kind = text(reply[0]);
    switch (kind) {
      case 'too_many_streams':
      case 'too_many_owner_streams':
      case 'gone':
      case 'source_not_found':
      case 'source_gone':
      case 'source_type_mismatch':
        return { kind };
      case 'bad_fork':
        return { kind, code: text(reply[1]) as 'bad_request' | 'offset_gone', message: text(reply[2]) };
      default: {
        const meta = this.saw(path, metaOf(reply));
        // A fork's first own message may be a cut of its source's (fork.lua): it is read, not cached here.
        if (kind === 'created' && !fork) this.cache.put(path, meta.epoch, 1, initial);
        return { kind: kind as 'created' | 'exists' | 'conflict', meta };
      }
    }
  }

  /**
   * Appends to one stream go to Redis one call at a time: those that arrive while its call runs
   * queue and go together in the next (group commit; append.lua checks and writes each as alone,
   * in arrival order, and answers each its own outcome). A lone append goes at once, as before; under
   * concurrent appends one script call, one reply and one wake serve many.
   */
  append(path: string, input: AppendInput): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      const queue = this.appending.get(path);
      if (queue) {
        queue.push({ input, resolve, reject });
        return;
      }
      this.appending.set(path, []);
      this.sendAppends(path, [{ input, resolve, reject }]);
    });
  }

  /** One call for `batch`; then the next of what queued meanwhile, until nothing did. */
  private sendAppends(path: string, batch: QueuedAppend[]): void {
    void this.appendCall(path, batch)
      .then(
        (results) => batch.forEach((a, i) => a.resolve(results[i]!)),
        (err: unknown) => batch.forEach((a) => a.reject(err)),
      )
      .finally(() => {
        const queued = this.appending.get(path) ?? [];
        if (queued.length === 0) {
          this.appending.delete(path);
          return;
        }
        const next = takeBatch(queued);
        this.appending.set(path, queued.slice(next.length));
        this.sendAppends(path, next);
      });
  }

  private async appendCall(path: string, batch: QueuedAppend[]): Promise<AppendResult[]> {
    const [floorEpoch, floorTail] = this.floor(path);
    const args: Arg[] = [
      ...this.keys(path),
      path,
      floorEpoch,
      floorTail,
      await this.runId,
      this.channel,
      this.followersKey,
      batch.length,
    ];
    for (const { input } of batch) {
      const p = input.producer;
      args.push(
        input.contentType ?? '',
        // '=' before it: an empty Stream-Seq is a value, not its absence (append.lua).
        input.streamSeq === null ? '' : `=${input.streamSeq}`,
        p?.id ?? '',
        p?.epoch ?? 0,
        p?.seq ?? 0,
        input.close ? '1' : '0',
        input.entries.length,
        ...input.entries,
      );
    }
    this.appendCalls++;
    const replies = (await this.redis.dsAppendBuffer(...args)) as unknown as Reply[];
    // Each appended batch is cached before the wake: this replica's readers of it find it here.
    const results = replies.map((reply, i) => this.appendResult(path, reply, batch[i]!.input));
    if (results.some((r) => r.kind === 'appended')) this.waiters.wake(path);
    return results;
  }

  private appendResult(path: string, reply: Reply, input: AppendInput): AppendResult {
    const kind = text(reply[0]);
    if (kind === 'not_found' || kind === 'gone') {
      this.missing(path);
      return { kind };
    }
    const meta = this.saw(path, metaOf(reply));
    const a = text(reply[META_FIELDS + 1]);
    const b = text(reply[META_FIELDS + 2]);
    switch (kind) {
      case 'appended':
        this.cache.put(path, meta.epoch, meta.tail - input.entries.length + 1, input.entries);
        return {
          kind,
          meta,
          producer: a === '' ? null : { epoch: Number(a), seq: Number(b) },
          followers: Number(text(reply[META_FIELDS + 3])),
        };
      case 'duplicate':
        return { kind, meta, producer: a === '' ? null : { epoch: Number(a), seq: Number(b) } };
      case 'stale_producer_epoch':
        return { kind, currentEpoch: Number(a) };
      case 'producer_epoch_seq_not_zero':
        return { kind };
      case 'producer_seq_gap':
        return { kind, expected: Number(a), received: Number(b) };
      case 'closed':
      case 'content_type_mismatch':
      case 'stream_seq_conflict':
        return { kind, meta };
      default:
        throw new Error(`append.lua answered ${kind}`);
    }
  }

  async read(path: string, after: number, maxEntries: number, maxBytes: number): Promise<ReadResult | null> {
    const hw = this.highWater.get(path);
    // A catch-up (a long way behind the tail this process last saw): the meta alone through the
    // script, then the page from the cache or a plain XRANGE. A read nearer the tail whose next
    // message is cached: the meta alone too, and read.lua only if the page is not all cached.
    const catchUp = hw !== undefined && hw.tail - after >= PLAIN_READ_FROM;
    if (catchUp || (hw && this.cache.has(path, hw.epoch, after + 1))) {
      const plain = await this.readPlain(path, after, maxEntries, maxBytes, catchUp);
      if (plain !== 'script') return plain;
    }
    return this.readScript(path, after, maxEntries, maxBytes, true);
  }

  /**
   * read.lua hands a page's messages through Lua (a 1,000 × 1 KB page: about 2.9 ms of
   * redis-server against 0.8 for a plain XRANGE). Here the script reads the meta alone (the fence,
   * the sliding TTL) with the stream's largest message (`mx`). A page whose every message is cached
   * at that epoch is answered from the cache (the same epoch, the same messages). Otherwise one MULTI
   * reads at most maxBytes / mx messages by XRANGE beside the epoch: the same epoch means the same
   * messages at those positions, so the page is the one read.lua would have given (and what it read
   * is cached). A fork's inherited part, a stream without `mx` (made before it was kept) or an epoch
   * moved in between: read.lua.
   *
   * The cache answers exactly the page the read would have answered without it: `sized` (a
   * catch-up), the XRANGE's page of at most maxBytes / mx messages; else read.lua's, which only the
   * byte bound cuts (and a page not all cached is read.lua's own).
   */
  private async readPlain(
    path: string,
    after: number,
    maxEntries: number,
    maxBytes: number,
    sized: boolean,
  ): Promise<ReadResult | null | 'script'> {
    const [floorEpoch, floorTail] = this.floor(path);
    const keys = this.keys(path);
    const reply = await this.redis.dsReadBuffer(
      ...keys,
      path,
      after,
      0,
      0,
      floorEpoch,
      floorTail,
      await this.runId,
      '1',
      '1',
    );
    if (text(reply[0]) === 'not_found') return this.missing(path);
    const meta = this.saw(path, metaOf(reply));
    if (meta.gone) this.cache.drop(path);
    if (meta.gone || after >= meta.tail || maxEntries <= 0) return { meta, entries: [] };
    const forkPoint = Number(text(reply[META_FIELDS + 1]));
    const largest = text(reply[META_FIELDS + 2]);
    const limit = Math.min(maxEntries, meta.tail - after);
    const count =
      sized && largest !== ''
        ? Math.min(limit, Math.max(1, Math.floor(maxBytes / Math.max(1, Number(largest)))))
        : limit;
    if (after >= forkPoint) {
      const cached = this.cache.page(path, meta.epoch, after, count, maxBytes);
      if (cached) return { meta, entries: cached };
    }
    if (!sized || largest === '' || after < forkPoint) return 'script';
    const [range, now] = (await this.redis
      .multi()
      .xrangeBuffer(keys[1]!, `${after + 1}-0`, `${after + count}-0`)
      .hmget(keys[0]!, 'epoch', 'gone')
      .exec()) as [[Error | null, [Buffer, Buffer[]][]], [Error | null, (string | null)[]]];
    if (range[0] || now[0]) throw range[0] ?? now[0];
    if (Number(now[1][0]) !== meta.epoch || now[1][1] === '1' || range[1].length !== count) return 'script';
    const read = range[1].map(([, fields]) => fields[1]!);
    this.cache.put(path, meta.epoch, after + 1, read);
    const entries: Buffer[] = [];
    let bytes = 0;
    for (const data of read) {
      if (entries.length > 0 && bytes + data.length > maxBytes) break;
      bytes += data.length;
      entries.push(data);
    }
    return { meta, entries };
  }

  private async readScript(
    path: string,
    after: number,
    maxEntries: number,
    maxBytes: number,
    touch: boolean,
  ): Promise<ReadResult | null> {
    const [floorEpoch, floorTail] = this.floor(path);
    const reply = await this.redis.dsReadBuffer(
      ...this.keys(path),
      path,
      after,
      maxEntries,
      maxBytes,
      floorEpoch,
      floorTail,
      await this.runId,
      touch ? '1' : '0',
      '0',
    );
    if (text(reply[0]) === 'not_found') return this.missing(path);
    const meta = this.saw(path, metaOf(reply));
    if (meta.gone) this.cache.drop(path);
    const entries = reply.slice(META_FIELDS + 1).map((e) => (typeof e === 'string' ? Buffer.from(e) : e));
    // The stream's own messages (a fork's come after its fork point, its first alias) are cached.
    const forkPoint = meta.aliases[0]?.upTo ?? 0;
    const own = Math.max(0, forkPoint - after);
    if (own < entries.length) this.cache.put(path, meta.epoch, after + own + 1, entries.slice(own));
    return { meta, entries };
  }

  async head(path: string): Promise<StreamMeta | null> {
    return (await this.readScript(path, 0, 0, 0, false))?.meta ?? null;
  }

  async delete(path: string): Promise<DeleteResult> {
    const result = (await this.redis.dsDelete(...this.keys(path), path, this.channel)) as DeleteResult;
    this.cache.drop(path);
    // A soft-deleted stream keeps its offsets (its forks' aliases name them): its floor stays.
    if (result !== 'gone') this.highWater.delete(path);
    this.waiters.wake(path);
    return result;
  }

  async followersChanged(): Promise<void> {
    await this.redis.incr(this.followersKey);
  }

  waitAfter(path: string, after: number, timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome> {
    return this.waiters.waitUntil(
      path,
      async () => {
        const meta = await this.head(path);
        return !meta || meta.gone || meta.tail > after || meta.closed;
      },
      timeoutMs,
      signal,
    );
  }

  /** Bytes the read cache holds now (tests: it stays within its budget). */
  get cachedBytes(): number {
    return this.cache.bytes;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.reaper);
    this.subscriber.disconnect();
  }
}
