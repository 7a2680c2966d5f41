/**
 * The general Durable Streams store (PROTOCOL.md of durable-streams/durable-streams): named,
 * writable streams on the gateway's own store, beside the capsule logs. One interface, two stores
 * (`memory-stream-store.ts`, `redis-stream-store.ts`); the HTTP surface (adapters/durable-streams)
 * speaks only to this. Every mutation is one atomic step: nothing a refused request sent is kept.
 */

/** A stream's configuration and position. `tail` counts the messages (entries) appended so far. */
export interface StreamMeta {
  contentType: string;
  /** Stream-TTL as created: a sliding window of seconds, renewed by every access but HEAD; or null. */
  ttlSeconds: number | null;
  /** Absolute expiry (ms since epoch): the last access plus Stream-TTL, or Stream-Expires-At; or null. */
  expiresAtMs: number | null;
  /** Stream-Expires-At exactly as created (it is echoed on HEAD), or null. */
  expiresAt: string | null;
  closed: boolean;
  /** The first component of every offset of this stream; a new one fences a store regression. */
  epoch: number;
  tail: number;
  /**
   * Soft-deleted: deleted (or expired) while forks still read its data. Every method answers 410
   * (a PUT 409) until the last fork goes, then the stream is removed.
   */
  gone: boolean;
  /** The ancestors' offsets this stream (a fork) also accepts, newest ancestor first (forks.ts). */
  aliases: EpochAlias[];
}

/** A fork shares its source's offsets up to the fork point: `epoch` is the source's, `upTo` the fork point. */
export interface EpochAlias {
  epoch: number;
  upTo: number;
}

/** PUT with `Stream-Forked-From` (PROTOCOL.md §4.2), validated by the HTTP layer. */
export interface ForkRequest {
  /** The source's stream path (after `/v1/stream/`). */
  source: string;
  /** `Stream-Fork-Offset` parsed; null: the source's tail. */
  offset: { epoch: number; position: number } | null;
  /** `Stream-Fork-Sub-Offset` (0 when absent): bytes of the next message, or JSON messages. */
  subOffset: number;
  /** No Content-Type on the PUT: the source's. */
  inheritContentType: boolean;
  /** Neither Stream-TTL nor Stream-Expires-At on the PUT: the source's. */
  inheritExpiry: boolean;
}

/** The configuration PUT compares for its idempotent 200 / conflicting 409. */
export interface StreamConfig {
  contentType: string;
  ttlSeconds: number | null;
  expiresAt: string | null;
  /** `Stream-Closed: true` on create. */
  closed: boolean;
}

/** §5.2.1 producer headers, already validated as non-negative safe integers. */
export interface ProducerClaim {
  id: string;
  epoch: number;
  seq: number;
}

export type CreateResult =
  | { kind: 'created'; meta: StreamMeta }
  | { kind: 'exists'; meta: StreamMeta }
  | { kind: 'conflict'; meta: StreamMeta }
  | { kind: 'too_many_streams' }
  /** The owner holds its share of maxStreams (`maxStreamsPerOwner`). */
  | { kind: 'too_many_owner_streams' }
  /** The path holds a soft-deleted stream: it cannot be created again while forks read it. */
  | { kind: 'gone' }
  | { kind: 'source_not_found' }
  | { kind: 'source_gone' }
  | { kind: 'source_type_mismatch' }
  | { kind: 'bad_fork'; code: 'bad_request' | 'offset_gone'; message: string };

export interface AppendInput {
  /** The request's Content-Type (normalised), compared with the stream's; null for a close-only POST. */
  contentType: string | null;
  /** The messages to append (JSON mode: one per flattened element; bytes: the body). May be empty only with close. */
  entries: Buffer[];
  streamSeq: string | null;
  producer: ProducerClaim | null;
  /** `Stream-Closed: true`: close after appending `entries`. */
  close: boolean;
}

export type AppendResult =
  | {
      kind: 'appended';
      meta: StreamMeta;
      producer: { epoch: number; seq: number } | null;
      /**
       * The followers' generation (`followersChanged`) as the append read it, atomically with the
       * append; absent where the store keeps none (a follower cache then asks every time).
       */
      followers?: number;
    }
  /** A producer's retry of an accepted batch, or a close of a closed stream: nothing written. */
  | { kind: 'duplicate'; meta: StreamMeta; producer: { epoch: number; seq: number } | null }
  | { kind: 'not_found' }
  | { kind: 'gone' }
  | { kind: 'content_type_mismatch'; meta: StreamMeta }
  | { kind: 'stream_seq_conflict'; meta: StreamMeta }
  | { kind: 'closed'; meta: StreamMeta }
  | { kind: 'stale_producer_epoch'; currentEpoch: number }
  | { kind: 'producer_epoch_seq_not_zero' }
  | { kind: 'producer_seq_gap'; expected: number; received: number };

export interface ReadResult {
  meta: StreamMeta;
  /**
   * Messages at positions after..after+n (each one entry as appended). Read-only: a store may hand
   * the same array to every read of the same page (the Redis store's read cache), so a caller may
   * keep what it builds from a page beside that array.
   */
  entries: Buffer[];
}

export interface WaitOutcome {
  /** The stream has messages after the position, or was closed. */
  ready: boolean;
}

export type DeleteResult = 'deleted' | 'not_found' | 'gone';

export interface StreamStore {
  /**
   * With `fork`, a fork of `fork.source` (its data up to the fork point inherited, not copied).
   * `owner`: whose share of `maxStreamsPerOwner` the new stream counts against while it lives
   * (null or absent: no owner's, as without auth).
   */
  create(
    path: string,
    config: StreamConfig,
    initial: Buffer[],
    fork?: ForkRequest,
    owner?: string | null,
  ): Promise<CreateResult>;
  /** Any outcome on a live stream renews a Stream-TTL (sliding). */
  append(path: string, input: AppendInput): Promise<AppendResult>;
  /**
   * Messages after position `after` (0 = the start), at most `maxEntries` and about `maxBytes`,
   * a fork's inherited ones included; null: no such stream. Renews a Stream-TTL (a read is an access).
   */
  read(path: string, after: number, maxEntries: number, maxBytes: number): Promise<ReadResult | null>;
  /** The meta alone; unlike a read it renews no TTL (HEAD is not an access, as the suite has it). */
  head(path: string): Promise<StreamMeta | null>;
  /** A stream with living forks is soft-deleted (`gone`); the last fork's removal removes it. */
  delete(path: string): Promise<DeleteResult>;
  /**
   * Resolves once the stream has a message after `after`, is closed or gone, or after `timeoutMs`
   * (`ready: false`), or when `signal` aborts. Waiting never polls the store: appends wake it (on
   * Redis, those of every replica).
   */
  waitAfter(path: string, after: number, timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome>;
  /**
   * A set of followers (the subscriptions that may link a stream) changed: every later append
   * answers a higher `followers` generation, so a replica's cache of those sets knows it is stale.
   * Absent: appends answer no generation.
   */
  followersChanged?(): Promise<void>;
  close(): Promise<void>;
}

/** Bounds every store enforces (config `durableStreams`). */
export interface StreamBounds {
  maxStreams: number;
  /** Live streams one owner may hold (counted per `owner` given to create); absent: no share. */
  maxStreamsPerOwner?: number;
}
