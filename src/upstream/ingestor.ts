/**
 * One capsule's ingestion: the `stream/watch` loop, streaming alignment of every connection's replay
 * against the aligned tail, and every frame and fact handed to the log writer. Batching and
 * durability are the writer's; submitting tasks is `capsule-client.ts`'s.
 *
 * The aligned tail is what the writer accepted: a frame the writer refuses (queue full) ends the
 * connection, and once the writer has room again the next replay restores what the capsule still
 * holds. When the store lost records (writer `onReset`), the tail is read back from the store.
 */
import http from 'node:http';
import type { FactEntry, FrameEntry, LogEntry, LogRecord, ReleaseLine } from '../log/record.js';
import type { UpstreamStateName } from '../core/types.js';
import { speaksA2a1 } from '../core/release-lines.js';
import {
  cardSummary,
  extendedCardSessionId,
  readAgentCard,
  resumesById,
  type CapsuleCard,
} from './agent-card.js';
import { AlignedTail, isBufferedFrame } from './aligned-tail.js';
import { IdResume, resumeFrom, type IdResumeOutput } from './id-resume.js';
import type { IngestorOptions, IngestorState } from './ingestor-options.js';
import { ReconnectPolicy } from './reconnect-policy.js';
import { ReplayAligner, type AlignFrame, type MissingFact } from './replay-alignment.js';
import { runWatch, type WatchEnd } from './watch-connection.js';

export type { FrameSink, IngestorOptions, IngestorState, TailSource } from './ingestor-options.js';

export class CapsuleIngestor {
  private readonly bufferSize: number;
  private readonly policy: ReconnectPolicy;
  private readonly agent: http.Agent;
  private readonly abort = new AbortController();
  private current: IngestorState = {
    state: 'stopped',
    reason: null,
    lastFrameAt: null,
    reconnects: 0,
    ack: null,
  };
  /** What the writer accepted of the current capsule session. */
  private readonly tail: AlignedTail;
  /** The connection open now (null between connections). */
  private connection: Connection | null = null;
  /** What the capsule's agent card said before this connection (null: never read). */
  private card: CapsuleCard | null = null;
  private cardFailing = false;
  /** How this connection reads the replay: its line and (0.4+) cursor. */
  private plan: ConnectionPlan = { card: null, line: 'spec', lastEventId: '0', newSession: false };
  /** 0.4+: the previous connection proved the stored stretch is another session's. */
  private anotherSession = false;
  private lagged = false;
  /** The live frame that made the last connection end to replay (`frames skipped`). */
  private skipped: AlignFrame | null = null;
  /** Bumped by every store reset: the tail must be read from the store again. */
  private resets = 0;
  private seededAt = -1;
  private connections = 0;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly options: IngestorOptions) {
    this.bufferSize = options.bufferSize ?? 512;
    this.agent = new http.Agent({ keepAlive: true, keepAliveMsecs: options.keepAliveMs ?? 1000 });
    this.tail = new AlignedTail(this.bufferSize);
    this.policy = new ReconnectPolicy({
      backoffBaseMs: options.backoffBaseMs ?? 250,
      backoffCapMs: options.backoffCapMs ?? 30_000,
      jitterMs: options.reconnectJitterMs,
      maxPerSecond: options.maxConnectsPerSecond,
    });
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
    this.unsubscribe =
      this.options.writer.onReset?.((capsule) => {
        if (capsule === this.capsule) this.onStoreReset();
      }) ?? null;
    this.setState('connecting', 'start');
    this.loop = this.run().catch((err: unknown) => {
      this.options.logger?.error({ capsule: this.capsule, err }, 'upstream loop failed');
      this.setState('stopped', 'loop failed');
    });
  }

  /** Stop the loop and close the connection; resolves once nothing more will be appended. */
  async stop(): Promise<void> {
    this.abort.abort();
    this.wake?.();
    await this.loop;
    this.unsubscribe?.();
    this.agent.destroy();
    this.setState('stopped', 'stop');
  }

  private async run(): Promise<void> {
    const stopped = this.abort.signal;
    while (!stopped.aborted) {
      if (this.seededAt !== this.resets && !(await this.seed())) {
        await this.sleep(this.policy.afterFailure());
        continue;
      }
      this.setState('connecting', this.connections === 0 ? 'start' : 'reconnect');
      await this.sleep(this.policy.startDelay());
      if (stopped.aborted) break;
      this.plan = this.planFor(await this.readCard());
      if (stopped.aborted) break;
      const connection: Connection = {
        abort: new AbortController(),
        aligner: null,
        state: { phase: 'reading' },
      };
      const onStop = (): void => connection.abort.abort();
      stopped.addEventListener('abort', onStop, { once: true });
      this.connection = connection;
      const end = await runWatch({
        url: this.options.url,
        doorToken: this.options.doorToken ?? null,
        lastEventId: this.plan.lastEventId,
        ...(speaksA2a1(this.plan.line) ? { extraHeaders: { 'a2a-version': '1.0' } } : {}),
        agent: this.agent,
        signal: connection.abort.signal,
        replayQuietMs: this.options.replayQuietMs,
        replayMaxMs: this.options.replayMaxMs,
        connectTimeoutMs: this.options.connectTimeoutMs ?? 10_000,
        keepAliveMs: this.options.keepAliveMs,
        // 0.4+ writes heartbeats apart from its turns: silence there is a dead path, not a busy capsule.
        ...(resumesById(this.plan.line)
          ? {
              heartbeat: {
                intervalMs: this.options.heartbeatMs ?? 15_000,
                misses: this.options.heartbeatMisses ?? 3,
              },
            }
          : {}),
        handlers: {
          onAck: (ack) => this.onAck(connection, ack),
          onGap: (gap) => connection.aligner?.gap(gap),
          onFrame: (frame) => {
            if (connection.state.phase === 'reading') connection.aligner?.push(frame);
          },
          onComment: () => connection.aligner?.comment(),
          onQuiet: () => connection.aligner?.hint(),
        },
      });
      stopped.removeEventListener('abort', onStop);
      clearTimeout(connection.proofTimer);
      this.connection = null;
      // Frames whose fate is decided are released; a replay cut short is replayed next time.
      if (connection.state.phase === 'reading') connection.aligner?.close();
      if (stopped.aborted) break;
      if (end.kind === 'aborted') {
        const why = connection.state.phase === 'dropping' ? connection.state.reason : 'dropped';
        await this.afterDropped(why, end.acked);
      } else await this.sleep(this.onEnd(end));
    }
  }

  /** Read the stored session back: frames after the last `capsule-session-started` fact. */
  private async seed(): Promise<boolean> {
    const resets = this.resets;
    let records: LogRecord[];
    try {
      records = await this.options.store.readLast(this.capsule, this.bufferSize * 2);
    } catch (err) {
      this.options.logger?.debug({ capsule: this.capsule, err }, 'reading the stored tail failed');
      this.setState('backoff', 'store unavailable');
      return false;
    }
    this.tail.seed(records);
    this.seededAt = resets;
    return true;
  }

  /**
   * The card, read before every connection: a capsule upgraded in place (or restarted into a new
   * session) is seen at its next connection. Unreadable, the last card read stands; none ever read,
   * the spec's line, with a warning.
   */
  private async readCard(): Promise<CapsuleCard | null> {
    try {
      let card = await readAgentCard(this.options.url, {
        agent: this.agent,
        timeoutMs: this.options.cardTimeoutMs ?? 2000,
        signal: this.abort.signal,
      });
      const token = this.options.doorToken;
      if (card.sessionId === null && token && resumesById(card.line)) {
        // An authenticated door names its session on the extended card only; without the session a
        // restart is found by the replay check alone. A refused token leaves it unknown.
        const sessionId = await extendedCardSessionId(
          this.options.url,
          token,
          card.line,
          this.options.cardTimeoutMs ?? 2000,
        ).catch(() => null);
        if (sessionId !== null) card = { ...card, sessionId };
      }
      if (this.card && this.card.line !== card.line) {
        this.options.logger?.info(
          { capsule: this.capsule, from: this.card.line, to: card.line },
          'capsule release line changed',
        );
      }
      this.card = card;
      this.cardFailing = false;
    } catch (err) {
      if (!this.cardFailing && !this.abort.signal.aborted) {
        const using = this.card ? `the last card read (${this.card.line})` : "the spec's line";
        this.options.logger?.warn(
          { capsule: this.capsule, err: (err as Error).message },
          `agent card unreadable: using ${using}`,
        );
      }
      this.cardFailing = true;
    }
    return this.card;
  }

  private planFor(card: CapsuleCard | null): ConnectionPlan {
    const line = card?.line ?? 'spec';
    if (!resumesById(line)) return { card, line, lastEventId: '0', newSession: false };
    const { tail } = this;
    const stored = tail.frames.at(-1) ?? null;
    const lastId = stored && /^\d{1,20}$/.test(stored.upstreamId ?? '') ? BigInt(stored.upstreamId!) : null;
    // A stretch read with a line that has no id sequence, or from another session, is not resumable by id.
    const newSession =
      tail.hasHistory &&
      (this.anotherSession ||
        (tail.release !== null && !resumesById(tail.release)) ||
        (tail.session !== null && card?.sessionId != null && tail.session !== card.sessionId));
    return {
      card,
      line,
      lastEventId: resumeFrom({ lastId, newSession }),
      newSession,
      lastId,
      lastFrame: stored,
    };
  }

  private onAck(connection: Connection, ack: string | null): void {
    this.connections++;
    if (this.connections > 1) this.current.reconnects++;
    this.current.ack = ack ?? this.current.ack;
    const { plan } = this;
    const card = plan.card;
    // Whether the log held anything before this connection's own fact.
    const hasHistory = this.tail.hasHistory;
    this.fact({
      fact: 'upstream-connected',
      ack: ack ?? '',
      attempt: this.connections,
      release: plan.line,
      ...(card?.sessionId ? { sessionId: card.sessionId } : {}),
      ...(card ? { card: cardSummary(card) } : {}),
    });
    this.tail.release = plan.line;
    if (card?.sessionId) this.tail.session = card.sessionId;
    this.current.connection = {
      release: plan.line,
      sessionId: card?.sessionId ?? null,
      card: card ? cardSummary(card) : null,
    };
    if (resumesById(plan.line)) {
      const lagged = this.lagged;
      this.anotherSession = false;
      this.lagged = false;
      connection.aligner = new IdResume({
        lastId: plan.lastId ?? null,
        lastFrame: plan.lastFrame ?? null,
        hasHistory,
        newSession: plan.newSession,
        lagged,
        emit: (out) => this.onAligned(connection, out),
      });
    } else {
      const aligner = new ReplayAligner({
        storedTail: this.tail.frames,
        hasHistory,
        freshCapsule: !hasHistory && this.options.freshCapsules?.has(this.capsule) === true,
        bufferSize: this.bufferSize,
        idZero: this.tail.idZero,
        acceptSkip: this.skipped,
        emit: (out) => this.onAligned(connection, out),
      });
      connection.aligner = aligner;
      this.skipped = null;
      clearTimeout(connection.proofTimer);
      connection.proofTimer = setTimeout(() => {
        if (connection.aligner === aligner && connection.state.phase === 'reading') aligner.expire();
      }, this.options.replayProofMs ?? 2000);
      connection.proofTimer.unref();
    }
    this.setState('connected', 'connection-ack');
  }

  private onAligned(connection: Connection, out: IdResumeOutput): void {
    if (connection.state.phase === 'dropping') return;
    if (out.kind === 'reconnect') {
      // 0.4+: what this connection lost is still in the capsule's buffer: replay it now.
      if (out.reason === 'another session') this.anotherSession = true;
      if (out.reason === 'lagged') this.lagged = true;
      if (out.reason === 'frames skipped') this.skipped = out.frame ?? null;
      this.options.logger?.info({ capsule: this.capsule, reason: out.reason }, 'reconnecting to replay');
      this.drop(connection, out.reason);
      return;
    }
    if (out.kind === 'missing') return this.missing(out.fact);
    if (out.kind === 'new-session') {
      this.fact({ fact: 'capsule-session-started', reason: 'replay does not continue the stored session' });
      this.tail.frames = [];
      this.options.logger?.info({ capsule: this.capsule }, 'capsule session restarted');
      return;
    }
    const f = out.frame;
    if (f.upstreamId === null && (f.event === 'connection-ack' || f.event === 'gap')) {
      // Not expected after the replay; never a stored frame (record.ts). A late gap still says loss.
      if (f.event === 'gap') this.fact({ fact: 'frames-possibly-missing', reason: 'gap' });
      return;
    }
    this.frame(connection, f);
  }

  /** End the connection ourselves: nothing more of it reaches the writer. */
  private drop(connection: Connection, reason: DropReason): void {
    connection.state = { phase: 'dropping', reason };
    connection.abort.abort();
  }

  /** A connection we ended ourselves: wait for what made us end it, then reconnect at once. */
  private async afterDropped(why: DropReason | 'dropped', acked: boolean): Promise<void> {
    if (acked) this.fact({ fact: 'upstream-lost', reason: why });
    this.setState('backoff', why);
    if (why === 'log queue full') await this.untilStopped(this.options.writer.whenRoom?.(this.capsule));
    await this.sleep(this.policy.afterEstablished());
  }

  /** How long to wait before the next attempt. */
  private onEnd(end: Exclude<WatchEnd, { kind: 'aborted' }>): number {
    if (end.kind === 'capsule-closed') {
      this.fact({ fact: 'capsule-closed' });
      this.setState('closed', 'capsule-closed');
    } else {
      // A failed connect before any ack leaves no trace in the log, only in the state and pino.
      if (end.acked) this.fact({ fact: 'upstream-lost', reason: end.reason });
      this.setState('backoff', end.reason);
    }
    return end.acked ? this.policy.afterEstablished() : this.policy.afterFailure();
  }

  /** The store lost records: nothing more of this connection is trusted; re-read the tail, reconnect. */
  private onStoreReset(): void {
    this.resets++;
    this.options.logger?.warn({ capsule: this.capsule }, 'log store reset: re-reading the aligned tail');
    if (this.connection?.state.phase === 'reading') this.drop(this.connection, 'store reset');
  }

  private missing(m: MissingFact): void {
    this.fact({
      fact: 'frames-possibly-missing',
      reason: m.reason,
      ...(m.firstAvailableId !== undefined ? { firstAvailableId: m.firstAvailableId } : {}),
      ...(m.count !== undefined ? { count: m.count } : {}),
    });
  }

  private frame(connection: Connection, f: AlignFrame): void {
    const receivedAt = Date.now();
    const entry: FrameEntry = {
      kind: 'frame',
      event: f.event,
      upstreamId: f.upstreamId,
      data: f.data,
      receivedAt,
    };
    if (!this.append(entry)) {
      // Refused: it will never be in the log, so it must not join the tail. Stop here; the next
      // replay re-delivers it (and what follows) if the capsule still holds it.
      this.drop(connection, 'log queue full');
      return;
    }
    this.current.lastFrameAt = receivedAt;
    // The entry doubles as the aligned-tail item: one object per frame, not two.
    if (isBufferedFrame(f)) this.tail.remember(entry);
    this.options.onFrame?.({ event: f.event, upstreamId: f.upstreamId, data: f.data });
  }

  private fact(fact: DistributiveOmit<FactEntry, 'kind' | 'receivedAt'>): void {
    this.append({ kind: 'fact', ...fact, receivedAt: Date.now() } as FactEntry);
  }

  /** Synchronous enqueue: the upstream read never waits for the store. False: refused. */
  private append(entry: LogEntry): boolean {
    this.tail.hasHistory = true;
    const { writer } = this.options;
    if (writer.write) return writer.write(this.capsule, entry) !== false;
    writer.append(this.capsule, entry).catch((err: unknown) => {
      this.options.logger?.warn({ capsule: this.capsule, err }, 'log append failed');
    });
    return true;
  }

  private sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return this.untilStopped(new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
  }

  /** Wait for `p`, or until stop() wakes us. */
  private async untilStopped(p: Promise<void> | undefined): Promise<void> {
    if (!p || this.abort.signal.aborted) return;
    await Promise.race([p, new Promise<void>((resolve) => (this.wake = resolve))]);
    this.wake = null;
  }

  private setState(state: UpstreamStateName, reason: string): void {
    const from = this.current;
    if (from.state === state && from.reason === reason) return;
    this.current = { ...from, state, reason };
    this.options.logger?.info(
      { capsule: this.capsule, from: from.state, to: state, reason },
      'upstream state',
    );
    this.options.onState?.(this.state());
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

type IdResumeReconnect = Extract<IdResumeOutput, { kind: 'reconnect' }>['reason'];

/** Why we ended a connection ourselves. */
type DropReason = 'log queue full' | 'store reset' | IdResumeReconnect;

/** One `stream/watch` connection, from its request to its end. */
interface Connection {
  /** Aborted by us to end it (see `drop`), or by stop(). */
  abort: AbortController;
  /** From its ack: the spec line's replay alignment, or 0.4+'s resume by id. */
  aligner: ReplayAligner | IdResume | null;
  /** Ends the spec line's wait for a proven replay end (ReplayAligner.expire). */
  proofTimer?: NodeJS.Timeout;
  /**
   * `reading`: its frames reach the writer through the aligner. `dropping`: we ended it (the writer
   * refused a frame, the store reset, or the replay must be read again): nothing more of it does.
   */
  state: { phase: 'reading' } | { phase: 'dropping'; reason: DropReason };
}

interface ConnectionPlan {
  card: CapsuleCard | null;
  line: ReleaseLine;
  lastEventId: string;
  newSession: boolean;
  lastId?: bigint | null;
  lastFrame?: AlignFrame | null;
}
