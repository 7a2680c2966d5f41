/**
 * The core adapters ask: reads go to the hub, writes of surface records to the log writer, task
 * submission and cancel to the capsule's upstream client. It decides nothing about protocols.
 */
import { GatewayError } from '../errors.js';
import type { LogEntry, SubmissionEntry } from '../log/record.js';
import type { LogPosition } from '../log/store.js';
import type {
  CancelOutcome,
  CapsuleStatus,
  CursorStatus,
  GatewayCore,
  RpcForwardResult,
  SubmitOutcome,
  SubmitRequest,
  SubmitResult,
  Subscription,
  SubscribeOptions,
  UpstreamStateName,
  WaitResult,
} from './types.js';

/** The read side the hub provides: exactly these methods of the core, answered by `src/hub`. */
export type HubPort = Pick<GatewayCore, 'position' | 'cursorStatus' | 'read' | 'waitAfter' | 'subscribe'>;

/** The log writer: enqueue without blocking, resolve when durable. */
export interface WriterPort {
  append(capsule: string, entry: LogEntry): Promise<{ offset: number; epoch: number }>;
}

/** What the upstream room offers for one capsule. */
export interface UpstreamPort {
  readonly url: string;
  state(): { state: UpstreamStateName; lastFrameAt: number | null; reconnects: number; ack: string | null };
  submit(request: {
    text: string;
    contextId: string;
    messageId: string;
    rawBody?: string;
    rpcId?: string | number;
  }): Promise<SubmitOutcome>;
  cancel(taskId: string): Promise<CancelOutcome>;
  forward(body: string): Promise<RpcForwardResult>;
}

export interface GatewayCoreDeps {
  hub: HubPort;
  writer: WriterPort;
  upstreams: Map<string, UpstreamPort>;
  shutdownSignal: AbortSignal;
}

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

export class GatewayCoreImpl implements GatewayCore {
  readonly shutdownSignal: AbortSignal;

  constructor(private readonly deps: GatewayCoreDeps) {
    this.shutdownSignal = deps.shutdownSignal;
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

  conversationMode(capsule: string): 'stateless' | 'threaded' {
    return conversationModeOf(this.upstream(capsule).state().ack);
  }

  position(capsule: string): Promise<LogPosition> {
    this.upstream(capsule);
    return this.deps.hub.position(capsule);
  }

  cursorStatus(capsule: string, after: number): Promise<{ status: CursorStatus; position: LogPosition }> {
    this.upstream(capsule);
    return this.deps.hub.cursorStatus(capsule, after);
  }

  read(capsule: string, after: number, limit: number) {
    this.upstream(capsule);
    return this.deps.hub.read(capsule, after, limit);
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
    // Recorded before forwarding, so the submission precedes every frame of its task in the log.
    const recorded = await this.deps.writer.append(capsule, {
      kind: 'submission',
      ...request.record,
      contextId: request.contextId,
      messageId: request.messageId,
      text: request.text,
      receivedAt: Date.now(),
    });
    const outcome = await upstream.submit({
      text: request.text,
      contextId: request.contextId,
      messageId: request.messageId,
      ...(request.rawBody !== undefined ? { rawBody: request.rawBody } : {}),
      ...(request.rpcId !== undefined ? { rpcId: request.rpcId } : {}),
    });
    return { outcome, recorded };
  }

  cancel(capsule: string, taskId: string): Promise<CancelOutcome> {
    return this.upstream(capsule).cancel(taskId);
  }

  forwardRpc(capsule: string, body: string): Promise<RpcForwardResult> {
    return this.upstream(capsule).forward(body);
  }

  append(capsule: string, entry: SubmissionEntry): Promise<{ offset: number; epoch: number }> {
    this.upstream(capsule);
    return this.deps.writer.append(capsule, entry);
  }

  async status(capsule: string): Promise<CapsuleStatus> {
    const upstream = this.upstream(capsule);
    const s = upstream.state();
    return { id: capsule, url: upstream.url, ...s, position: await this.deps.hub.position(capsule) };
  }
}
