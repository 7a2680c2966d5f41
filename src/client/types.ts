/**
 * The public shapes of the browser client (murmur-gateway/client). No runtime code: the client must
 * stay dependency-free and compile to one self-contained module.
 */

/** A token, or a function that yields one (called again whenever a fresh one is needed). */
export type TokenInput = string | (() => string | Promise<string>);

/**
 * One record of a capsule's log, exactly as `GET /murmur/{capsule}/poll` returns it (docs/surfaces/native.md). Both
 * transports deliver the same objects: the SSE transport reads `GET /murmur/{capsule}/records`, whose
 * events carry the poll's JSON for each record.
 */
export type CapsuleRecord = CapsuleFrame | CapsuleFact | CapsuleSubmission;

/** A frame the capsule wrote. */
export interface CapsuleFrame {
  offset: number;
  kind: 'frame';
  event: string;
  /** The capsule's own `id:` label (a u64 as a decimal string), or null when it wrote none. */
  id: string | null;
  /** The data line, byte for byte (a string: some `error` frames are not valid JSON). */
  data: string;
  received_at: string;
}

/**
 * Something the gateway observed: `upstream-connected` {ack, attempt}, `upstream-lost` {reason},
 * `frames-possibly-missing` {reason, count?, first_available_id?}, `capsule-closed`,
 * `capsule-session-started` {reason}, `submission-failed` {message_id, reason}; fields in snake_case.
 */
export interface CapsuleFact {
  offset: number;
  kind: 'fact';
  fact: string;
  reason?: string;
  count?: number;
  received_at: string;
  [field: string]: unknown;
}

/** A message submitted through the gateway (any surface). */
export interface CapsuleSubmission {
  offset: number;
  kind: 'submission';
  protocol: string;
  owner: string | null;
  context_id: string;
  message_id: string;
  text: string;
  meta?: Record<string, unknown>;
  received_at: string;
}

/**
 * Frames may be missing before `first_available`:
 * - `frames-possibly-missing`: the log recorded why (`reason`: gap, cold-attach, capsule-restarted…),
 *   at `fact_offset`;
 * - `store-reset`: a new epoch began at `fact_offset` (offsets continue above the old ones);
 * - `retention`: the cursor was older than what the log keeps;
 * - `cursor-ahead`: the cursor was beyond the head (another store): reading starts over.
 */
export interface CapsuleGap {
  type: 'frames-possibly-missing' | 'store-reset' | 'retention' | 'cursor-ahead';
  reason: string;
  first_available: number;
  fact_offset?: number;
  count?: number;
}

export type Transport = 'sse' | 'long-poll';

/**
 * `connecting`: opening a connection (also between retries); `live`: receiving on the chosen
 * transport; `fallback`: on long-poll because SSE did not survive here (auto only); `closed`: for good.
 */
export interface FollowState {
  state: 'connecting' | 'live' | 'fallback' | 'closed';
  transport: Transport;
  /** Why, when the state changed because of a failure or a switch. */
  reason?: string;
}

export interface Subscription {
  /** The last offset delivered (records and gaps): pass it as `after` to resume. */
  readonly cursor: number;
  /** The transport in use right now. */
  readonly transport: Transport;
  close(): void;
}

export interface FollowCapsuleOptions {
  /** Base URL of the gateway, e.g. `https://gw.example.com` (a page may use `location.origin`). */
  gateway: string;
  capsule: string;
  /** Resume after this offset; default 0 = from the start of retention. */
  after?: number;
  transport?: 'auto' | Transport;
  /**
   * When given: `Authorization: Bearer` on fetch requests; an EventSource (`useEventSource`) gets a
   * short-lived ticket from `POST {gateway}/auth/tickets` instead, passed as `?ticket=`.
   */
  token?: TokenInput;
  onRecord(record: CapsuleRecord): void;
  onGap?(gap: CapsuleGap): void;
  onState?(state: FollowState): void;
  /** Use the browser's EventSource for SSE instead of a streamed fetch (needs tickets with a token). */
  useEventSource?: boolean;
  /** Tuning, mostly for tests (milliseconds). */
  tuning?: Partial<FollowTuning>;
}

export interface FollowTuning {
  /** An SSE connection with no byte by then counts as buffered by a proxy. */
  firstByteMs: number;
  /** An SSE connection that ends before this age died young. */
  youngMs: number;
  /** This many young deaths in a row switch `auto` to long-poll. */
  youngDeaths: number;
  /** First pause before probing SSE again from the fallback (doubles per failed probe). */
  probeMs: number;
  probeMaxMs: number;
  /** Longest long-poll hold (the gateway caps it at its `downstream.longPollMaxMs`). */
  pollHoldMs: number;
  /** Backoff after errors: base and ceiling. */
  backoffMs: number;
  backoffMaxMs: number;
  /** Records per long-poll page. */
  pollLimit: number;
}

/** One BeeOS envelope (BeeOS "Streaming"): `offset` is its cursor. */
export interface BeeosEnvelope {
  offset: number;
  type: string;
  [field: string]: unknown;
}

export interface FollowBeeosOptions {
  gateway: string;
  /** The agent id (= capsule id). */
  capsule: string;
  task?: string;
  conversation?: string;
  /** Resume after this envelope offset (default 0: the whole channel). */
  since?: number;
  /** The BeeOS key (`oag_…`), sent as `Authorization: Bearer`. */
  token?: TokenInput;
  includeDeltas?: boolean;
  onEnvelope(envelope: BeeosEnvelope): void;
  /** `backfill_truncated`: envelopes before `oldest_redis_offset` are gone. */
  onGap?(gap: { oldest_redis_offset: number; since: number; hint?: string }): void;
  /** After replay: `latest_offset` as the gateway reported it. */
  onReplayComplete?(info: { latest_offset: number }): void;
  onState?(state: FollowState): void;
  /** The stream ended for good (`task_terminal`, `channel_closed`): no reconnect follows. */
  onEnd?(reason: string): void;
  tuning?: Partial<FollowTuning>;
}

/** One event of a followed stream (`GET /v1/follow`), in its surface's own terms. */
export interface FollowManyEvent {
  /** The stream key, e.g. `murmur:alpha`, `flue:alpha/chat`, `beeos:alpha/tasks/task_…`, `ds:room/a`. */
  stream: string;
  /** That stream's cursor after this event: store it to resume the stream. */
  cursor: string;
  /** The surface's event name: `record`, `gap`, `data`, `message`, `end`, `backfill_truncated`… */
  event: string;
  data: unknown;
}

export interface FollowManyOptions {
  gateway: string;
  /** Stream key → that stream's cursor (`-1` from the start, `now` from the head, else its own cursor). */
  streams: Record<string, string>;
  transport?: 'auto' | Transport;
  /** As followCapsule's: Bearer on fetches; with `useEventSource`, tickets fetched with it. */
  token?: TokenInput;
  /** Every event of every stream, once, in each stream's order. */
  onEvent(event: FollowManyEvent): void;
  onState?(state: FollowState): void;
  /** Use the browser's EventSource for SSE instead of a streamed fetch (needs tickets with a token). */
  useEventSource?: boolean;
  /**
   * A name: the tabs of this origin that follow with the same name hold one connection between them
   * (a leader elected by a Web Lock relays over a BroadcastChannel). Ignored where the browser has
   * neither; each tab then holds its own.
   */
  share?: string | undefined;
  tuning?: Partial<FollowTuning>;
}

export interface FollowManySubscription {
  /** Every stream's cursor now (the last event delivered of each): pass them as `streams` to resume. */
  readonly cursors: Record<string, string>;
  readonly transport: Transport;
  /** Follow one more stream from `cursor` (the connection is reopened with every stream's cursor). */
  add(key: string, cursor?: string): void;
  /** Stop following a stream; nothing of it is delivered after this call. */
  remove(key: string): void;
  close(): void;
}
