/**
 * The small interface adapters ask the core through. Adapters never reach Redis or a capsule
 * directly: reads go through the hub, submissions and cancels through the upstream room.
 * Implemented by `src/core/gateway-core.ts`.
 */
import type { LogPosition } from '../log/store.js';
import type { CardSummary, LogEntry, LogRecord, ReleaseLine, SubmissionEntry } from '../log/record.js';
import type { HeldClaim } from '../fleet/claims.js';

export type { HeldClaim } from '../fleet/claims.js';

/** Why a subscription ended. A subscriber resumes from the last offset it saw, whatever the reason. */
export type SubscriptionEnd =
  | 'closed' // the subscriber closed it (its signal aborted)
  | 'slow' // its queue passed the bound: it could not keep up
  | 'shutdown' // the gateway is draining
  | 'store_error' // the store failed while catching up
  | 'store_unreachable'; // this replica lost its store: the client resumes on another replica

export interface SubscribeOptions {
  /** Deliver records with offset > after. */
  after: number;
  /**
   * Batches in order, catch-up pages first then live, never overlapping and never concurrently.
   * The same record objects go to every subscriber of a capsule (encode once, cache per record).
   */
  onRecords: (records: readonly LogRecord[]) => void | Promise<void>;
  onEnd: (reason: SubscriptionEnd) => void;
  /** Bound on records queued for this subscriber; past it the subscription ends as 'slow'. */
  maxQueuedRecords?: number;
  signal?: AbortSignal;
  /** The surface serving it (murmur, beeos, flue, durable-streams): the delivery-lag metric's label. */
  surface?: string;
}

export interface Subscription {
  close(): void;
}

/** One page of a context's records (GatewayCore.readContext). */
export interface ContextPage {
  records: LogRecord[];
  /** Resume here: the log offset this answer is complete through for the context. */
  next: number;
  position: LogPosition;
}

export interface WaitResult {
  records: LogRecord[];
  timedOut: boolean;
  position: LogPosition;
}

/** How a cursor relates to the log: older than retention, within it, or beyond the head. */
export type CursorStatus = 'ok' | 'gone' | 'ahead';

/** What became of a task submitted upstream (`message/stream`). */
export type SubmitOutcome =
  | { kind: 'accepted'; taskId: string; contextId: string }
  /** Admitted into the capsule's submission queue (`SubmitRequest.queue`): its owner hands it over. */
  | { kind: 'queued' }
  /** The capsule wrote a `rejected` status: `frame` is its data line, byte for byte. */
  | { kind: 'rejected'; frame: { id: string | null; data: string } }
  /** The capsule wrote an `error` frame (data line byte for byte, possibly invalid JSON). */
  | { kind: 'invalid'; data: string }
  /** JSON-RPC error answered as JSON (e.g. -32601 for `task_acceptance: none`): body byte for byte. */
  | { kind: 'method-not-found'; body: string }
  | { kind: 'unreachable'; reason: string };

export interface SubmitRequest {
  /** Text of the user message, as the capsule will receive it. */
  text: string;
  contextId: string;
  messageId: string;
  /** The submission record to append before forwarding (offset returned in `recorded`). */
  record: Omit<SubmissionEntry, 'kind' | 'receivedAt' | 'contextId' | 'messageId' | 'text'>;
  /** Raw JSON-RPC request id to use upstream (defaults to a fresh one). */
  rpcId?: string | number;
  /**
   * Forward this JSON-RPC body verbatim instead of building one (native Murmur pass-through, so the
   * capsule's own validation answers). text/contextId/messageId then only describe the record.
   */
  rawBody?: string;
  /**
   * Admit into the capsule's durable submission queue instead of sending now (BeeOS and Flue): it
   * runs when the capsule is free, in admission order. Refused past the queue bounds (`queue_full`).
   */
  queue?: boolean;
}

export interface SubmitResult {
  outcome: SubmitOutcome;
  /** Where the submission record landed in the log. */
  recorded: { offset: number; epoch: number };
}

export type CancelOutcome =
  | { kind: 'canceled'; body: string }
  | { kind: 'not-cancelable'; body: string } // JSON-RPC error from the capsule (ended/unknown task)
  | { kind: 'method-not-found'; body: string }
  | { kind: 'unreachable'; reason: string };

export interface RpcForwardResult {
  status: number;
  contentType: string;
  body: string;
}

export type UpstreamStateName = 'connecting' | 'connected' | 'backoff' | 'closed' | 'stopped';

export interface UpstreamConnection {
  release: ReleaseLine;
  sessionId: string | null;
  card: CardSummary | null;
}

export interface CapsuleStatus {
  id: string;
  url: string;
  state: UpstreamStateName;
  /** Why the upstream is in that state (e.g. 'store unavailable', 'log queue full', a socket error). */
  reason?: string | null;
  lastFrameAt: number | null;
  reconnects: number;
  /** The last `connection-ack` data line, or null before the first connection. */
  ack: string | null;
  /** The capsule's release line, session and agent card as last connected (null: not known yet). */
  release: ReleaseLine | null;
  sessionId: string | null;
  card: CardSummary | null;
  /** Null when the store could not be read (unreachable from this replica): a degraded answer. */
  position: LogPosition | null;
  /** frames-possibly-missing facts the capsule's log has recorded, ever (null: store unreadable). */
  possiblyMissing: number | null;
  /** As `GatewayCore.conversationMode`, taken with the rest (a removed capsule has none). */
  conversationMode: 'stateless' | 'threaded';
  /** The submission queue: how many wait, and how long the oldest has waited (ms). */
  queue: { depth: number; oldestMs: number };
}

export interface GatewayCore {
  capsuleIds(): string[];
  hasCapsule(capsule: string): boolean;
  /** `conversation_mode` from the capsule's last `connection-ack` ('stateless' until known). */
  conversationMode(capsule: string): 'stateless' | 'threaded';
  /** The capsule's release line as last connected (this replica's watch, else the log); null: unknown. */
  releaseLine(capsule: string): ReleaseLine | null;
  position(capsule: string): Promise<LogPosition>;
  cursorStatus(capsule: string, after: number): Promise<{ status: CursorStatus; position: LogPosition }>;
  /** One page of records after `after` (catch-up, JSON pagination). */
  read(
    capsule: string,
    after: number,
    limit: number,
  ): Promise<{ records: LogRecord[]; position: LogPosition }>;
  /**
   * One context's records (a Flue conversation, a BeeOS channel: every record a ContextTracker
   * attributes to `contextId`, and the earlier frames of its tasks once a record names their
   * context) plus the records that concern every context (facts, frames of no task), with
   * offset > after, in offset order, at most `limit`. Frames of a task no record has linked to a
   * context yet are left out, unless the task is one of `tasks` (the caller knows it is the
   * context's, e.g. a BeeOS channel's accepted submission before its outcome record). Costs
   * O(what it returns), not O(the capsule): a projector fed these sees every record it would have
   * used from a whole-capsule `read` (a superset of that context's). Caught up to the head as of the
   * call, writes through other replicas included. Resume from `next`: the offset the answer is
   * complete through (the last record returned when `limit` cut it short, else at least the head
   * as of the call; never below `after`). Trimmed offsets are missing: check `cursorStatus` first.
   */
  readContext(
    capsule: string,
    contextId: string,
    after: number,
    limit: number,
    tasks?: readonly string[],
  ): Promise<ContextPage>;
  /** The first retained offset attributed to `contextId` (null: none retained), caught up as readContext. */
  contextFirst(capsule: string, contextId: string): Promise<number | null>;
  /** Records after `after`, at once when some exist, else when the next arrive or after timeoutMs. */
  waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<WaitResult>;
  subscribe(capsule: string, options: SubscribeOptions): Subscription;
  /** Record the submission, then send it upstream with `message/stream`. */
  submit(capsule: string, request: SubmitRequest): Promise<SubmitResult>;
  cancel(capsule: string, taskId: string): Promise<CancelOutcome>;
  /**
   * Withdraw every queued or running queued-submission of a context: queued ones never reach the
   * capsule, a running one's task is canceled. Settled with `outcome` on every surface. Returns how many.
   */
  withdrawContext(
    capsule: string,
    contextId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<number>;
  /**
   * Withdraw one queued or running queued-submission by its id (its record's `messageId`), leaving
   * the context's others alone. False when it is no longer in the queue.
   */
  withdrawSubmission(
    capsule: string,
    submissionId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<boolean>;
  /** Forward a JSON-RPC body the gateway does not interpret (tasks/get, message/send, …). */
  forwardRpc(capsule: string, body: string): Promise<RpcForwardResult>;
  /** Append a record made by a surface (e.g. a BeeOS channel close) and return its offset. */
  append(capsule: string, entry: SubmissionEntry): Promise<{ offset: number; epoch: number }>;
  status(capsule: string): Promise<CapsuleStatus>;
  /** Every capsule's status; one removed meanwhile (admin API, discovery) is left out. */
  statuses(): Promise<CapsuleStatus[]>;
  /**
   * Take `key` for this capsule across every replica for `ttlMs` (released earlier by its holder),
   * or null while another request holds it: for the few decisions that must be made once before
   * anything is in the log (two replicas receiving the same idempotency key at the same instant).
   */
  claimOnce(capsule: string, key: string, ttlMs: number): Promise<HeldClaim | null>;
  /** Aborted when the gateway starts draining: every live stream ends cleanly. */
  readonly shutdownSignal: AbortSignal;
}

/** What the core reads the log through: the hub's read side. */
export type HubPort = Pick<
  GatewayCore,
  'position' | 'cursorStatus' | 'read' | 'readContext' | 'contextFirst' | 'waitAfter' | 'subscribe'
> & {
  /** The log's count of frames-possibly-missing facts. */
  possiblyMissing(capsule: string): Promise<number>;
};

/**
 * The log writer: enqueue without blocking, resolve when durable. When `signal` aborts before the
 * entry's batch was first sent to the store the entry is withdrawn (never appended) and the promise
 * rejects with `store_unavailable` `{withdrawn: true}`; once sent it settles by the store's answer.
 */
export interface WriterPort {
  append(
    capsule: string,
    entry: LogEntry,
    options?: { signal?: AbortSignal },
  ): Promise<{ offset: number; epoch: number }>;
}

/** What the upstream room offers for one capsule. */
export interface UpstreamPort {
  readonly url: string;
  state(): {
    state: UpstreamStateName;
    reason?: string | null;
    lastFrameAt: number | null;
    reconnects: number;
    ack: string | null;
    /** This replica's own connection's line, session and card (absent when it does not ingest). */
    connection?: UpstreamConnection | null;
  };
  submit(request: {
    text: string;
    contextId: string;
    messageId: string;
    rawBody?: string;
    rpcId?: string | number;
    /** The log offset of the submission's record: the task's frames come after it. */
    after?: number;
    /** W3C trace context sent with the `message/stream` request (the hand-off's span). */
    traceparent?: string;
  }): Promise<SubmitOutcome>;
  cancel(taskId: string): Promise<CancelOutcome>;
  forward(body: string): Promise<RpcForwardResult>;
}
