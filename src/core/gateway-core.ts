/**
 * The core adapters ask: reads go to the hub, writes of surface records to the log writer, task
 * submission and cancel to the capsule's upstream client. It decides nothing about protocols.
 */
import type { ReleaseLine } from '../log/record.js';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { FactEntry, SubmissionEntry } from '../log/record.js';
import type { LogPosition } from '../log/store.js';
import { MemoryClaims, type ClaimStore, type HeldClaim } from '../fleet/claims.js';
import { AckFromLog } from './ack-from-log.js';
import { endSpan, startSpan, traceparentOf, tracingOn, withSpan } from '../tracing.js';
import { withTimeout } from '../timeouts.js';
import type { SubmissionQueues } from './submission-queue.js';
import type {
  CancelOutcome,
  CapsuleStatus,
  ContextPage,
  CursorStatus,
  GatewayCore,
  HubPort,
  UpstreamPort,
  WriterPort,
  RpcForwardResult,
  SubmitRequest,
  SubmitResult,
  Subscription,
  SubscribeOptions,
  WaitResult,
} from './types.js';

/** The ports the core is built on (types.ts), for the composition that provides them. */
export type { HubPort, UpstreamPort, WriterPort } from './types.js';

export interface GatewayCoreDeps {
  hub: HubPort;
  writer: WriterPort;
  upstreams: Map<string, UpstreamPort>;
  shutdownSignal: AbortSignal;
  /**
   * How long a submission (or a surface record) may wait for the store before its client is told
   * `store_unavailable`. Default 5000.
   */
  submitStoreTimeoutMs?: number;
  logger?: Logger;
  /** Claims shared by the replicas (Redis); default: this process alone (memory). */
  claims?: ClaimStore;
  /** The submission queues (`SubmitRequest.queue`); without them every submission is sent at once. */
  queues?: SubmissionQueues;
}

const DEFAULT_SUBMIT_STORE_TIMEOUT_MS = 5_000;

type Recorded = { offset: number; epoch: number };

const conversationModeOf = (ack: string | null): 'stateless' | 'threaded' => {
  if (!ack) return 'stateless';
  try {
    return (JSON.parse(ack) as { conversation_mode?: string }).conversation_mode === 'threaded'
      ? 'threaded'
      : 'stateless';
  } catch {
    return 'stateless';
  }
};

/** The submission record a request makes (queued or sent at once). */
const submissionOf = (request: SubmitRequest): SubmissionEntry => ({
  kind: 'submission',
  ...request.record,
  contextId: request.contextId,
  messageId: request.messageId,
  text: request.text,
  receivedAt: Date.now(),
});

export class GatewayCoreImpl implements GatewayCore {
  readonly shutdownSignal: AbortSignal;
  private readonly claims: ClaimStore;
  private readonly logAcks: AckFromLog;

  constructor(private readonly deps: GatewayCoreDeps) {
    this.shutdownSignal = deps.shutdownSignal;
    this.claims = deps.claims ?? new MemoryClaims();
    this.logAcks = new AckFromLog(deps.hub);
  }

  capsuleIds(): string[] {
    return [...this.deps.upstreams.keys()];
  }

  hasCapsule(capsule: string): boolean {
    return this.deps.upstreams.has(capsule);
  }

  private upstream(capsule: string): UpstreamPort {
    const u = this.deps.upstreams.get(capsule);
    if (!u) throw new GatewayError('capsule_not_found', `unknown capsule "${capsule}"`);
    return u;
  }

  releaseLine(capsule: string): ReleaseLine | null {
    const s = this.upstream(capsule).state();
    return s.connection?.release ?? this.logAcks.connection(capsule)?.release ?? null;
  }

  conversationMode(capsule: string): 'stateless' | 'threaded' {
    const s = this.upstream(capsule).state();
    // Ingesting here: the watch's own ack. Otherwise the owner's, as logged (then our last term's).
    if (s.state !== 'stopped' && s.ack) return conversationModeOf(s.ack);
    return conversationModeOf(this.logAcks.ack(capsule) ?? s.ack);
  }

  position(capsule: string): Promise<LogPosition> {
    this.upstream(capsule);
    return this.deps.hub.position(capsule);
  }

  cursorStatus(capsule: string, after: number): Promise<{ status: CursorStatus; position: LogPosition }> {
    this.upstream(capsule);
    return this.deps.hub.cursorStatus(capsule, after);
  }

  async read(capsule: string, after: number, limit: number) {
    this.upstream(capsule);
    const page = await this.deps.hub.read(capsule, after, limit);
    this.logAcks.observe(capsule, page.records);
    return page;
  }

  async readContext(
    capsule: string,
    contextId: string,
    after: number,
    limit: number,
    tasks?: readonly string[],
  ): Promise<ContextPage> {
    this.upstream(capsule);
    const page = await this.deps.hub.readContext(capsule, contextId, after, limit, tasks);
    this.logAcks.observe(capsule, page.records);
    return page;
  }

  contextFirst(capsule: string, contextId: string): Promise<number | null> {
    this.upstream(capsule);
    return this.deps.hub.contextFirst(capsule, contextId);
  }

  waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<WaitResult> {
    this.upstream(capsule);
    return this.deps.hub.waitAfter(capsule, after, limit, timeoutMs, signal);
  }

  subscribe(capsule: string, options: SubscribeOptions): Subscription {
    this.upstream(capsule);
    return this.deps.hub.subscribe(capsule, options);
  }

  async submit(capsule: string, request: SubmitRequest): Promise<SubmitResult> {
    const upstream = this.upstream(capsule);
    if (this.shutdownSignal.aborted) throw new GatewayError('shutting_down', 'the gateway is shutting down');
    if (!tracingOn()) return this.submitNow(capsule, upstream, request, null);
    // The admission's span, child of the request's (the client's traceparent): what the writer's
    // store round trips and, through the log, the owner's hand-off continue.
    const span = startSpan('murmur.submission.admit', {
      attributes: {
        'murmur.capsule': capsule,
        'murmur.surface': request.record.protocol,
        'murmur.message_id': request.messageId,
        'murmur.queued': request.queue === true,
      },
    });
    try {
      const result = await withSpan(span, () =>
        this.submitNow(capsule, upstream, request, traceparentOf(span)),
      );
      span?.setAttribute('murmur.offset', result.recorded.offset);
      endSpan(span);
      return result;
    } catch (err) {
      endSpan(span, err);
      throw err;
    }
  }

  private async submitNow(
    capsule: string,
    upstream: UpstreamPort,
    request: SubmitRequest,
    trace: string | null,
  ): Promise<SubmitResult> {
    const queues = this.deps.queues;
    if (request.queue && queues && request.rawBody === undefined) {
      const fold = await queues.current(capsule);
      // `task_acceptance: none` (learned from a hand-off): refused at admission, as without a queue.
      if (!fold.acceptsNone) {
        // An unreachable capsule refuses at admission, as without a queue (clients retry a 503);
        // what was queued before waits and runs once it is back.
        const watch = upstream.state().state;
        if (watch === 'stopped' ? fold.upstreamLost : watch !== 'connected')
          throw new GatewayError('upstream_unreachable', 'the capsule is unreachable');
        queues.checkRoom(fold, request.record.owner);
        const entry: SubmissionEntry = { ...submissionOf(request), queued: true };
        if (trace) entry.trace = trace;
        const recorded = await this.record(capsule, entry);
        // Durable: the owner's dispatcher hands it over now, not at its next look at the log.
        queues.admitted(capsule, recorded.offset);
        return { outcome: { kind: 'queued' }, recorded };
      }
    }
    // Recorded before forwarding, so the submission precedes every frame of its task in the log.
    // A submission the store cannot record in time fails, and is then never forwarded.
    const recorded = await this.record(capsule, submissionOf(request));
    const outcome = await upstream.submit({
      text: request.text,
      contextId: request.contextId,
      messageId: request.messageId,
      after: recorded.offset,
      ...(request.rawBody !== undefined ? { rawBody: request.rawBody } : {}),
      ...(request.rpcId !== undefined ? { rpcId: request.rpcId } : {}),
      ...(trace ? { traceparent: trace } : {}),
    });
    return { outcome, recorded };
  }

  cancel(capsule: string, taskId: string): Promise<CancelOutcome> {
    return this.upstream(capsule).cancel(taskId);
  }

  async withdrawContext(
    capsule: string,
    contextId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<number> {
    this.upstream(capsule);
    return this.deps.queues ? this.deps.queues.withdrawContext(capsule, contextId, outcome, reason) : 0;
  }

  async withdrawSubmission(
    capsule: string,
    submissionId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<boolean> {
    this.upstream(capsule);
    return this.deps.queues
      ? this.deps.queues.withdrawSubmission(capsule, submissionId, outcome, reason)
      : false;
  }

  forwardRpc(capsule: string, body: string): Promise<RpcForwardResult> {
    return this.upstream(capsule).forward(body);
  }

  append(capsule: string, entry: SubmissionEntry): Promise<{ offset: number; epoch: number }> {
    this.upstream(capsule);
    return this.record(capsule, entry);
  }

  /**
   * Append a surface's entry, bounded by `submitStoreTimeoutMs`. Past it the entry is withdrawn from
   * the writer's queue when it was not sent yet; when it was (a frozen store holds the batch), it may
   * still become durable after its client was told it failed, so a `submission-failed` fact is queued
   * right behind it (same lane, FIFO): every projection then treats it as never made.
   */
  private async record(capsule: string, entry: SubmissionEntry): Promise<Recorded> {
    const timeoutMs = this.deps.submitStoreTimeoutMs ?? DEFAULT_SUBMIT_STORE_TIMEOUT_MS;
    const abort = new AbortController();
    const appended = this.deps.writer.append(capsule, entry, { signal: abort.signal });
    const first = await withTimeout(appended, timeoutMs, () => 'timeout' as const);
    if (first !== 'timeout') return first;
    abort.abort();
    // The writer answers a withdrawal at once; give it one turn before deciding the entry was sent.
    const settled = await Promise.race([
      appended.then(
        (at) => ({ kind: 'durable' as const, at }),
        (err: unknown) => ({ kind: 'failed' as const, err }),
      ),
      new Promise<{ kind: 'in-flight' }>((resolve) => setImmediate(() => resolve({ kind: 'in-flight' }))),
    ]);
    // Durable in that same turn: its client has not been told anything yet, so it goes on.
    if (settled.kind === 'durable') return settled.at;
    if (
      settled.kind === 'failed' &&
      settled.err instanceof GatewayError &&
      settled.err.code === 'shutting_down'
    )
      throw settled.err;
    if (settled.kind === 'in-flight') this.markFailed(capsule, entry.messageId);
    this.deps.logger?.warn(
      { capsule, messageId: entry.messageId, timeoutMs, withdrawn: settled.kind === 'failed' },
      'submission not recorded in time: the store is unavailable',
    );
    throw new GatewayError('store_unavailable', 'the log store did not record the submission in time', {
      timeoutMs,
    });
  }

  private markFailed(capsule: string, messageId: string): void {
    const fact: FactEntry = {
      kind: 'fact',
      fact: 'submission-failed',
      messageId,
      reason: 'store-unavailable',
      receivedAt: Date.now(),
    };
    this.deps.writer.append(capsule, fact).catch((err: unknown) => {
      this.deps.logger?.error({ capsule, messageId, err }, 'could not record a failed submission');
    });
  }

  /** A store that does not answer within the submit timeout is `store_unavailable`, as a submit is. */
  async claimOnce(capsule: string, key: string, ttlMs: number): Promise<HeldClaim | null> {
    this.upstream(capsule);
    const timeoutMs = this.deps.submitStoreTimeoutMs ?? DEFAULT_SUBMIT_STORE_TIMEOUT_MS;
    const claiming = this.claims.claimOnce(capsule, key, ttlMs);
    try {
      const got = await withTimeout(claiming, timeoutMs, () => 'timeout' as const);
      if (got !== 'timeout') return got;
    } catch (err) {
      this.deps.logger?.warn({ capsule, err }, 'claim failed: the store is unavailable');
    }
    // A claim taken after we gave up is released as soon as it lands (or expires with its TTL).
    claiming.then(
      (late) => late?.release(),
      () => undefined,
    );
    throw new GatewayError('store_unavailable', 'the log store did not answer in time', { timeoutMs });
  }

  async statuses(): Promise<CapsuleStatus[]> {
    const all = await Promise.all(
      this.capsuleIds().map((id) =>
        this.status(id).catch((err: unknown) => {
          // Removed between the list and its status (the capsule set changes at run time).
          if (err instanceof GatewayError && err.code === 'capsule_not_found') return null;
          throw err;
        }),
      ),
    );
    return all.filter((s): s is CapsuleStatus => s !== null);
  }

  async status(capsule: string): Promise<CapsuleStatus> {
    const upstream = this.upstream(capsule);
    const s = upstream.state();
    // This replica's own connection if it ingests the capsule, else what the log says the owner's was.
    const logged = this.logAcks.connection(capsule);
    const connection = s.connection ?? logged;
    // The store's part may be out of reach (a partition): the rest is this replica's own knowledge
    // and is still answered, the store's fields null (operators see "degraded", never a 500).
    const [position, possiblyMissing] = await Promise.all([
      this.deps.hub.position(capsule).catch(() => null),
      this.deps.hub.possiblyMissing(capsule).catch(() => null),
    ]);
    return {
      id: capsule,
      url: upstream.url,
      state: s.state,
      reason: s.reason,
      lastFrameAt: s.lastFrameAt,
      reconnects: s.reconnects,
      ack: s.ack,
      release: connection?.release ?? null,
      sessionId: connection?.sessionId ?? null,
      card: connection?.card ?? null,
      conversationMode: this.conversationMode(capsule),
      queue: this.deps.queues?.stats(capsule) ?? { depth: 0, oldestMs: 0 },
      position,
      possiblyMissing,
    };
  }
}
