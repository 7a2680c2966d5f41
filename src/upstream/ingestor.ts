/**
 * One capsule's ingestion: the `stream/watch` loop with jittered exponential backoff, replay
 * reconciliation against the session's stored tail, and every frame and fact handed to the log writer.
 * Batching and durability are the writer's; submitting tasks is `capsule-client.ts`'s.
 */
import http from 'node:http';
import type { Logger } from 'pino';
import type { FactEntry, FrameEntry, LogEntry, LogRecord } from '../log/record.js';
import type { UpstreamStateName } from '../core/types.js';
import { IdZeroTracker, reconcile, type AlignFrame, type MissingFact } from './reconcile.js';
import type { SseFrame } from './sse-frames.js';
import { runWatch, type WatchEnd } from './watch-connection.js';

/** The writer's append (LogWriter fits): enqueues synchronously, resolves when durable. */
export interface FrameSink {
  append(capsule: string, entry: LogEntry): Promise<unknown>;
  /** The same without a promise, when the sink offers it (LogWriter does): cheaper per frame. */
  write?(capsule: string, entry: LogEntry): void;
}

/** The store read used once at start, to continue the session a previous gateway process stored. */
export interface TailSource {
  readLast(capsule: string, count: number): Promise<LogRecord[]>;
}

export interface IngestorOptions {
  capsule: string;
  url: string;
  doorToken?: string | null;
  writer: FrameSink;
  store: TailSource;
  logger?: Logger;
  /** The capsule's replay buffer size (spec: 512). */
  bufferSize?: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
  /** A connection that lasted this long resets the backoff. */
  healthyAfterMs?: number;
  replayQuietMs?: number;
  replayMaxMs?: number;
  connectTimeoutMs?: number;
  /** Observe each frame appended (capsule-client uses it to find a task whose stream closed early). */
  onFrame?: (frame: SseFrame) => void;
  /** Observe state changes (tests and metrics; pino gets one line per change regardless). */
  onState?: (state: IngestorState) => void;
}

export interface IngestorState {
  state: UpstreamStateName;
  lastFrameAt: number | null;
  reconnects: number;
  ack: string | null;
}

/** Frames that never enter a replay buffer are not part of the aligned tail (spec "Replay"). */
const isBufferedFrame = (f: { upstreamId: string | null }): boolean => f.upstreamId !== null;

export class CapsuleIngestor {
  private readonly opts: Required<
    Pick<
      IngestorOptions,
      'bufferSize' | 'backoffBaseMs' | 'backoffCapMs' | 'healthyAfterMs' | 'replayQuietMs' | 'replayMaxMs'
    >
  >;
  private readonly agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 15_000 });
  private readonly abort = new AbortController();
  private current: IngestorState = { state: 'stopped', lastFrameAt: null, reconnects: 0, ack: null };
  /** Last `bufferSize` id-bearing frames appended for the current capsule session, oldest first. */
  private tail: AlignFrame[] = [];
  private hasHistory = false;
  /** Each task's latest task-counter id, to spot attempts whose id-0 frame never reached us. */
  private readonly idZero = new IdZeroTracker();
  /** Whether the log held anything before this connection's own `upstream-connected` fact. */
  private historyAtConnect = false;
  private connections = 0;
  private loop: Promise<void> | null = null;
  private wakeBackoff: (() => void) | null = null;

  constructor(private readonly options: IngestorOptions) {
    this.opts = {
      bufferSize: options.bufferSize ?? 512,
      backoffBaseMs: options.backoffBaseMs ?? 250,
      backoffCapMs: options.backoffCapMs ?? 30_000,
      healthyAfterMs: options.healthyAfterMs ?? 5_000,
      replayQuietMs: options.replayQuietMs ?? 50,
      replayMaxMs: options.replayMaxMs ?? 1000,
    };
  }

  get capsule(): string {
    return this.options.capsule;
  }

  /** State for /capsules. */
  state(): IngestorState {
    return { ...this.current };
  }

  /** Start the watch loop (idempotent). */
  start(): void {
    if (this.loop) return;
    this.setState('connecting', 'start');
    this.loop = this.run().catch((err: unknown) => {
      this.options.logger?.error({ capsule: this.capsule, err }, 'upstream loop failed');
      this.setState('stopped', 'loop failed');
    });
  }

  /** Stop the loop and close the connection; resolves once nothing more will be appended. */
  async stop(): Promise<void> {
    this.abort.abort();
    this.wakeBackoff?.();
    await this.loop;
    this.agent.destroy();
    this.setState('stopped', 'stop');
  }

  private async run(): Promise<void> {
    await this.seed();
    let failures = 0;
    while (!this.abort.signal.aborted) {
      this.setState('connecting', this.connections === 0 ? 'start' : 'reconnect');
      const startedAt = Date.now();
      const end = await runWatch({
        url: this.options.url,
        doorToken: this.options.doorToken ?? null,
        agent: this.agent,
        signal: this.abort.signal,
        replayQuietMs: this.opts.replayQuietMs,
        replayMaxMs: this.opts.replayMaxMs,
        connectTimeoutMs: this.options.connectTimeoutMs ?? 10_000,
        handlers: {
          onAck: (ack) => this.onAck(ack),
          onReplay: (gap, frames) => this.onReplay(gap, frames),
          onLive: (frame) => this.onLive(frame),
        },
      });
      if (end.kind === 'aborted') break;
      this.onEnd(end);
      failures = end.acked && Date.now() - startedAt >= this.opts.healthyAfterMs ? 0 : failures + 1;
      await this.backoff(failures);
    }
  }

  /** Continue the stored session: frames after the last `capsule-session-started` fact. */
  private async seed(): Promise<void> {
    const records = await this.options.store.readLast(this.capsule, this.opts.bufferSize * 2);
    this.hasHistory = records.length > 0;
    let from = 0;
    records.forEach((r, i) => {
      if (r.kind === 'fact' && r.fact === 'capsule-session-started') from = i + 1;
    });
    for (const r of records.slice(from)) {
      if (r.kind === 'frame' && isBufferedFrame(r)) {
        this.remember({ event: r.event, upstreamId: r.upstreamId, data: r.data });
        this.idZero.note(r);
      }
    }
  }

  private onAck(ack: string | null): void {
    this.connections++;
    this.historyAtConnect = this.hasHistory;
    if (this.connections > 1) this.current.reconnects++;
    this.current.ack = ack ?? this.current.ack;
    this.fact({ fact: 'upstream-connected', ack: ack ?? '', attempt: this.connections });
    this.setState('connected', 'connection-ack');
  }

  private onReplay(gap: { firstAvailableId: string } | null, frames: SseFrame[]): void {
    const result = reconcile({
      storedTail: this.tail,
      hasHistory: this.historyAtConnect,
      lastEventId: '0',
      gap,
      replay: frames,
      bufferSize: this.opts.bufferSize,
    });
    for (const m of result.missing) {
      this.missing(m);
      if (m.reason === 'capsule-restarted') {
        this.fact({ fact: 'capsule-session-started', reason: 'replay does not continue the stored session' });
        this.tail = [];
        this.idZero.reset();
        this.options.logger?.info({ capsule: this.capsule }, 'capsule session restarted');
      }
    }
    let next = 0;
    result.append.forEach((f, i) => {
      for (; result.missingAt[next]?.index === i; next++) this.missing(result.missingAt[next]!.fact);
      this.idZero.note(f); // already accounted for by reconcile
      this.frame(f);
    });
    this.options.logger?.debug(
      {
        capsule: this.capsule,
        replayed: frames.length,
        overlap: result.overlap,
        appended: result.append.length,
      },
      'replay reconciled',
    );
  }

  private onLive(frame: SseFrame): void {
    if (frame.upstreamId === null && (frame.event === 'connection-ack' || frame.event === 'gap')) {
      // Not expected after the replay; never a stored frame (record.ts). A late gap still says loss.
      if (frame.event === 'gap') this.fact({ fact: 'frames-possibly-missing', reason: 'gap' });
      return;
    }
    if (this.idZero.note(frame)) this.missing({ reason: 'id-zero-unreplayable', count: 1 });
    this.frame(frame);
  }

  private onEnd(end: Exclude<WatchEnd, { kind: 'aborted' }>): void {
    if (end.kind === 'capsule-closed') {
      this.fact({ fact: 'capsule-closed' });
      this.setState('closed', 'capsule-closed');
      return;
    }
    // A failed connect before any ack leaves no trace in the log, only in the state and pino.
    if (end.acked) this.fact({ fact: 'upstream-lost', reason: end.reason });
    this.setState('backoff', end.reason);
  }

  private async backoff(failures: number): Promise<void> {
    if (this.abort.signal.aborted) return;
    // Full jitter: uniform in [base/2, min(cap, base·2^n)], so a fleet does not reconnect in step.
    const ceiling = Math.min(this.opts.backoffCapMs, this.opts.backoffBaseMs * 2 ** Math.min(failures, 20));
    const delay = Math.round(
      this.opts.backoffBaseMs / 2 + Math.random() * Math.max(0, ceiling - this.opts.backoffBaseMs / 2),
    );
    if (this.current.state !== 'closed') this.setState('backoff', `retry in ${delay} ms`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, delay);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wakeBackoff = done;
    });
    this.wakeBackoff = null;
  }

  private missing(m: MissingFact): void {
    this.fact({
      fact: 'frames-possibly-missing',
      reason: m.reason,
      ...(m.firstAvailableId !== undefined ? { firstAvailableId: m.firstAvailableId } : {}),
      ...(m.count !== undefined ? { count: m.count } : {}),
    });
  }

  private frame(f: SseFrame | AlignFrame): void {
    const receivedAt = Date.now();
    this.current.lastFrameAt = receivedAt;
    const entry: FrameEntry = {
      kind: 'frame',
      event: f.event,
      upstreamId: f.upstreamId,
      data: f.data,
      receivedAt,
    };
    // The entry doubles as the aligned-tail item: one object per frame, not two.
    if (isBufferedFrame(f)) this.remember(entry);
    this.append(entry);
    this.options.onFrame?.({ event: f.event, upstreamId: f.upstreamId, data: f.data });
  }

  private remember(f: AlignFrame): void {
    this.tail.push(f);
    // Trim in steps, not per frame: keeps appends O(1) amortised at high rates.
    if (this.tail.length > this.opts.bufferSize * 2) this.tail = this.tail.slice(-this.opts.bufferSize);
  }

  private fact(fact: DistributiveOmit<FactEntry, 'kind' | 'receivedAt'>): void {
    this.append({ kind: 'fact', ...fact, receivedAt: Date.now() } as FactEntry);
  }

  private append(entry: LogEntry): void {
    this.hasHistory = true;
    // Synchronous enqueue: the upstream read never waits for the store (issue 2, "Ingestion").
    const { writer } = this.options;
    if (writer.write) return writer.write(this.capsule, entry);
    writer.append(this.capsule, entry).catch((err: unknown) => {
      this.options.logger?.warn({ capsule: this.capsule, err }, 'log append failed');
    });
  }

  private setState(state: UpstreamStateName, reason: string): void {
    const from = this.current.state;
    if (from === state) return;
    this.current.state = state;
    this.options.logger?.info({ capsule: this.capsule, from, to: state, reason }, 'upstream state');
    this.options.onState?.(this.state());
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
