/**
 * The general Durable Streams store (PROTOCOL.md of durable-streams/durable-streams): named,
 * writable streams on the gateway's own store, beside the capsule logs. One interface, two stores
 * (`memory-stream-store.ts`, `redis-stream-store.ts`); the HTTP surface (adapters/durable-streams)
 * speaks only to this. Every mutation is one atomic step: nothing a refused request sent is kept.
 */

/** A stream's configuration and position. `tail` counts the messages (entries) appended so far. */
export interface StreamMeta {
  contentType: string;
  /** Stream-TTL as created (seconds from creation), or null. */
  ttlSeconds: number | null;
  /** Absolute expiry (ms since epoch) from Stream-TTL or Stream-Expires-At, or null. */
  expiresAtMs: number | null;
  /** Stream-Expires-At exactly as created (it is echoed on HEAD), or null. */
  expiresAt: string | null;
  closed: boolean;
  /** The first component of every offset of this stream; a new one fences a store regression. */
  epoch: number;
  tail: number;
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
  | { kind: 'too_many_streams' };

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
  | { kind: 'appended'; meta: StreamMeta; producer: { epoch: number; seq: number } | null }
  /** A producer's retry of an accepted batch, or a close of a closed stream: nothing written. */
  | { kind: 'duplicate'; meta: StreamMeta; producer: { epoch: number; seq: number } | null }
  | { kind: 'not_found' }
  | { kind: 'content_type_mismatch'; meta: StreamMeta }
  | { kind: 'stream_seq_conflict'; meta: StreamMeta }
  | { kind: 'closed'; meta: StreamMeta }
  | { kind: 'stale_producer_epoch'; currentEpoch: number }
  | { kind: 'producer_epoch_seq_not_zero' }
  | { kind: 'producer_seq_gap'; expected: number; received: number };

export interface ReadResult {
  meta: StreamMeta;
  /** Messages at positions after..after+n (each one entry as appended). */
  entries: Buffer[];
}

export interface WaitOutcome {
  /** The stream has messages after the position, or was closed. */
  ready: boolean;
}

export interface StreamStore {
  create(path: string, config: StreamConfig, initial: Buffer[]): Promise<CreateResult>;
  append(path: string, input: AppendInput): Promise<AppendResult>;
  /** Messages after position `after` (0 = the start), at most `maxEntries` and about `maxBytes`; null: no such stream. */
  read(path: string, after: number, maxEntries: number, maxBytes: number): Promise<ReadResult | null>;
  head(path: string): Promise<StreamMeta | null>;
  /** true when the stream existed. */
  delete(path: string): Promise<boolean>;
  /**
   * Resolves once the stream has a message after `after`, is closed or gone, or after `timeoutMs`
   * (`ready: false`), or when `signal` aborts. Waiting never polls the store: appends wake it (on
   * Redis, those of every replica).
   */
  waitAfter(path: string, after: number, timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome>;
  close(): Promise<void>;
}

/** Bounds every store enforces (config `durableStreams`). */
export interface StreamBounds {
  maxStreams: number;
}
