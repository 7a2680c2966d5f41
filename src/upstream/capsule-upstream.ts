/**
 * The upstream room for one capsule, as the core sees it (`UpstreamPort`): the ingestor's watch and
 * state, plus the client's submit, cancel and forward. Wiring capsules to it is the app's job.
 *
 * In a fleet only the replica owning the capsule ingests it (src/fleet): ingestion starts and stops
 * with ownership, each term a fresh ingestor seeded from the store (exactly like a reconnect), while
 * submit, cancel and forward work on every replica (a submit follows its task's start in the log,
 * `logFrames`, since the watch that shows it may be another replica's).
 */
import type { Logger } from 'pino';
import type { UpstreamPort } from '../core/gateway-core.js';
import type { CancelOutcome, RpcForwardResult, SubmitOutcome } from '../core/types.js';
import { CapsuleClient, type CapsuleClientOptions, type SubmitParams } from './capsule-client.js';
import { CapsuleIngestor, type IngestorOptions, type IngestorState } from './ingestor.js';
import type { SseFrame } from './sse-frames.js';

export interface CapsuleUpstreamOptions
  extends Omit<IngestorOptions, 'logger'>, Omit<CapsuleClientOptions, 'url' | 'doorToken' | 'watchFrames'> {
  logger?: Logger;
  /**
   * The capsule's frames as logged after an offset (by whichever replica ingests it), live, until
   * the returned function is called. A submit waits for its task's first frame there when it knows
   * its record's offset, so it works on a replica that does not ingest the capsule; without it (or
   * an offset) only this replica's own watch is seen.
   */
  logFrames?: (after: number, listener: (frame: SseFrame) => void) => () => void;
}

/**
 * Reasons a watch is down that say nothing against the path to the capsule: ours (the store away,
 * the log queue full), or an answer the capsule gave (a refused token, an HTTP error), which another
 * replica would get as well.
 */
const NOT_THE_PATH = /^(store unavailable|log queue full|store reset|unauthorized|HTTP \d)/;

const notIngesting: IngestorState = {
  state: 'stopped',
  reason: 'not owner',
  lastFrameAt: null,
  reconnects: 0,
  ack: null,
};

export class CapsuleUpstream implements UpstreamPort {
  readonly client: CapsuleClient;

  private readonly frameListeners = new Set<(frame: SseFrame) => void>();
  private current: CapsuleIngestor | null = null;
  /** The previous term's ingestor winding down: the next term starts only after it ended. */
  private stopping: Promise<void> = Promise.resolve();
  private lastState: IngestorState = notIngesting;
  private readonly connectWaiters: (() => void)[] = [];
  /** Since when this term's watch has not been connected for a reason on the path to the capsule. */
  private cutSince: number | null = null;

  constructor(private readonly options: CapsuleUpstreamOptions) {
    this.client = new CapsuleClient({
      ...options,
      url: options.url,
      doorToken: options.doorToken ?? null,
      watchedLine: () => this.current?.state().connection?.release ?? null,
      watchFrames: (listener, after) => {
        // The log holds every frame any owner ingested, in order: one source, whoever owns the
        // capsule now or takes it over while the submission waits.
        const { logFrames } = this.options;
        if (logFrames && after !== undefined) return logFrames(after, listener);
        this.frameListeners.add(listener);
        return () => this.frameListeners.delete(listener);
      },
    });
  }

  get url(): string {
    return this.client.url;
  }

  /** The ingestor of the current term (null while this replica does not ingest the capsule). */
  get ingestor(): CapsuleIngestor | null {
    return this.current;
  }

  /** Whether this replica ingests the capsule now. */
  get ingesting(): boolean {
    return this.current !== null;
  }

  /** Start ingesting (idempotent): a new term, after the previous one fully stopped. */
  start(): void {
    if (this.current) return;
    const { onFrame, onState } = this.options;
    const ingestor = new CapsuleIngestor({
      ...this.options,
      onFrame: (frame) => {
        onFrame?.(frame);
        for (const l of this.frameListeners) l(frame);
      },
      onState: (state) => {
        if (this.current === ingestor) this.noteState(state);
        onState?.(state);
        if (state.state === 'connected') for (const wake of this.connectWaiters.splice(0)) wake();
      },
    });
    this.current = ingestor;
    this.cutSince = Date.now();
    void this.stopping.then(() => {
      if (this.current === ingestor) ingestor.start();
    });
  }

  /**
   * Resolves once a watch is connected (its ack read: now, or after a start still to come), or after
   * `timeoutMs`. Start-up waits on it (bounded) for the capsules this replica owns.
   */
  connected(timeoutMs: number): Promise<void> {
    if (this.current?.state().state === 'connected') return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const waiters = this.connectWaiters;
      function done(): void {
        clearTimeout(timer);
        const i = waiters.indexOf(done);
        if (i !== -1) waiters.splice(i, 1);
        resolve();
      }
      waiters.push(done);
    });
  }

  /** Stop ingesting (the watch closes at once); resolves once nothing more will be appended. */
  stopIngesting(): Promise<void> {
    const ingestor = this.current;
    if (!ingestor) return this.stopping;
    this.current = null;
    this.cutSince = null;
    this.lastState = { ...ingestor.state(), state: 'stopped', reason: 'not owner' };
    const previous = this.stopping;
    this.stopping = Promise.all([previous, ingestor.stop()]).then(() => undefined);
    return this.stopping;
  }

  async stop(): Promise<void> {
    this.client.close();
    await this.stopIngesting();
  }

  /**
   * How long (ms) this replica's watch has been unable to reach the capsule: 0 while connected, while
   * not ingesting, or while the reason is on our side (the store away, the log queue full).
   */
  unreachableFor(): number {
    return this.cutSince === null ? 0 : Date.now() - this.cutSince;
  }

  private noteState(state: IngestorState): void {
    if (state.state === 'connected' || NOT_THE_PATH.test(state.reason ?? '')) this.cutSince = null;
    else if (state.state === 'backoff' || state.state === 'connecting') this.cutSince ??= Date.now();
  }

  state(): IngestorState {
    return this.current?.state() ?? this.lastState;
  }

  submit(request: SubmitParams): Promise<SubmitOutcome> {
    return this.client.submit(request);
  }

  cancel(taskId: string): Promise<CancelOutcome> {
    return this.client.cancel(taskId);
  }

  forward(body: string): Promise<RpcForwardResult> {
    return this.client.forward(body);
  }
}
