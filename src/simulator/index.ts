/**
 * A simulated Murmur capsule (the Murmur streaming protocol, quirks included) for tests and the
 * demo: `startSimulator()` serves the door on 127.0.0.1 and exposes control hooks (cut, restart,
 * closeStream, stop). Wire details live in server.ts / frames.ts; task scripts in script.ts. The
 * `release` option picks a later release line's wire (release-line.ts); 'spec' is the spec's.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { capsuleClosedFrame, type Frame } from './frames.js';
import { createDoorHandler, type DoorHost, type DoorOptions } from './server.js';
import { Session, type SessionOptions } from './session.js';
import type { Connection } from './connection.js';
import type { ClosedQueueEntry, TaskOutcome } from './tasks.js';
import { SIM_RELEASES, lineRules, type SimRelease } from './release-line.js';

export { SIM_RELEASES, type SimRelease } from './release-line.js';

/** How long 0.6+ connections drain at session shutdown before they end (no capsule-closed). */
const SHUTDOWN_DRAIN_MS = 500;

export interface RestartOptions {
  /** The line the restarted capsule runs (an in-place upgrade); default: the current line. */
  release?: SimRelease;
  /**
   * The door token after the restart; null turns auth off. Omitted: 0.5+ with a token mints a new
   * random one (tokens are minted again on every restart), older lines keep theirs.
   */
  doorToken?: string | null;
}

export interface SimulatorOptions {
  port?: number;
  host?: string;
  heartbeatMs?: number;
  conversationMode?: 'stateless' | 'threaded';
  taskAcceptance?: 'none' | 'single' | 'queue';
  bufferSize?: number;
  connectionQueue?: number;
  doorToken?: string | null;
  frameDelayMs?: number;
  /** The release line to speak (default 'spec', the spec's wire). */
  release?: SimRelease;
}

export interface WrittenFrame {
  session: number;
  event: string;
  id: string | null;
  data: string;
}

export interface TaskHandle {
  taskId: string;
  contextId: string;
  done: Promise<{ state: string; response?: string }>;
}

export interface SimulatedCapsule extends EventEmitter {
  readonly url: string;
  readonly port: number;
  readonly session: number;
  /** The current session's `ses_…` id (a restart makes a new one), as its agent card reports it. */
  readonly sessionId: string;
  readonly written: WrittenFrame[];
  /**
   * Open `stream/watch` connections now. Each change is also emitted as `watchers` (the count), so a
   * fleet test can sample it on every connection event.
   */
  readonly watchers: number;
  /**
   * Frames silently dropped so far to `stream/watch` readers that fell behind (the spec's lagging
   * reader: never written, no gap), closed connections included: a bench can say a loss was the
   * capsule's, not the reader's.
   */
  readonly droppedToWatchers: number;
  /** Requests the door refused for their token (each also emitted as `refused`, the count). */
  readonly refusedRequests: number;
  /** The release line the current session speaks. */
  readonly release: SimRelease;
  /** The door token in force now (null: no auth); a 0.5+ restart mints a new one. */
  readonly doorToken: string | null;
  /**
   * Tasks accepted per A2A messageId over message/stream, every session: a message run twice shows
   * 2. Each one is also a 'run' event (the messageId), for tests that wait for the capsule to take one.
   */
  readonly runs: ReadonlyMap<string, number>;
  submit(text: string, contextId?: string): TaskHandle;
  idle(): Promise<void>;
  cutConnections(): void;
  /** A process restart: new session (optionally on another line, with another token). */
  restart(opts?: RestartOptions): Promise<void>;
  closeStream(): void;
  stop(): Promise<void>;
}

/** Callers outside TypeScript (env vars, CLI) may pass any string: refuse an unknown line loudly. */
const checkRelease = (release: SimRelease): SimRelease => {
  if (!SIM_RELEASES.includes(release)) {
    throw new Error(`unknown release line ${String(release)}: one of ${SIM_RELEASES.join('|')}`);
  }
  return release;
};

class SimCapsule extends EventEmitter implements SimulatedCapsule, DoorHost {
  readonly written: WrittenFrame[] = [];
  readonly runs = new Map<string, number>();
  readonly options: DoorOptions;
  current: Session;
  private readonly sessionOptions: SessionOptions;
  private readonly sockets = new Set<Socket>();
  private readonly tracked = new Set<Connection>();
  /** What watch connections that are gone had dropped (see droppedToWatchers). */
  private droppedByGone = 0;
  private refusedCount = 0;
  private readonly live = new Set<Connection>();
  private stopped = false;
  private boundPort: number | undefined;
  private release_: SimRelease;

  constructor(
    private readonly server: Server,
    private readonly host: string,
    opts: SimulatorOptions,
  ) {
    super();
    this.options = {
      heartbeatMs: opts.heartbeatMs ?? 15_000,
      connectionQueue: opts.connectionQueue ?? 128,
      conversationMode: opts.conversationMode ?? 'stateless',
      doorToken: opts.doorToken ?? null,
      acceptance: opts.taskAcceptance ?? 'single',
    };
    this.release_ = checkRelease(opts.release ?? 'spec');
    this.sessionOptions = {
      bufferSize: opts.bufferSize ?? 512,
      acceptance: this.options.acceptance,
      frameDelayMs: opts.frameDelayMs ?? 0,
    };
    this.current = this.newSession(1);
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** The bound port (kept after stop() so a test can check that nothing listens there any more). */
  get port(): number {
    this.boundPort ??= (this.server.address() as AddressInfo).port;
    return this.boundPort;
  }

  get url(): string {
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `http://${host}:${this.port}/`;
  }

  get session(): number {
    return this.current.number;
  }

  get sessionId(): string {
    return this.current.id;
  }

  get release(): SimRelease {
    return this.current.rules.release;
  }

  get doorToken(): string | null {
    return this.options.doorToken;
  }

  get watchers(): number {
    let n = 0;
    for (const conn of this.tracked) if (conn.isWatch) n++;
    return n;
  }

  get droppedToWatchers(): number {
    let n = this.droppedByGone;
    for (const conn of this.tracked) if (conn.isWatch) n += conn.dropped;
    return n;
  }

  track(conn: Connection): void {
    this.tracked.add(conn);
    if (conn.isWatch) this.emit('watchers', this.watchers);
  }

  untrack(conn: Connection): void {
    const had = this.tracked.delete(conn);
    if (had && conn.isWatch) this.droppedByGone += conn.dropped;
    this.live.delete(conn);
    if (had && conn.isWatch) this.emit('watchers', this.watchers);
  }

  goLive(conn: Connection): void {
    if (conn.isOpen) this.live.add(conn);
  }

  get refusedRequests(): number {
    return this.refusedCount;
  }

  refused(): void {
    this.emit('refused', ++this.refusedCount);
  }

  countRun(messageId: string): void {
    this.runs.set(messageId, (this.runs.get(messageId) ?? 0) + 1);
    this.emit('run', messageId);
  }

  submit(text: string, contextId?: string): TaskHandle {
    if (this.options.acceptance === 'none')
      throw new Error('task_acceptance is none: message/stream is refused');
    const result = this.current.runner.submit(text, contextId);
    const { taskId, contextId: ctx, done } = result.task;
    return { taskId, contextId: ctx, done: done as Promise<TaskOutcome> };
  }

  idle(): Promise<void> {
    return this.current.runner.idle();
  }

  cutConnections(): void {
    for (const conn of [...this.tracked]) conn.destroy();
    for (const s of [...this.sockets]) s.destroy();
  }

  async restart(opts: RestartOptions = {}): Promise<void> {
    // A process restart: sockets drop without capsule-closed; a fresh session resets buffer and counters.
    this.current.end();
    this.cutConnections();
    if (opts.release !== undefined) this.release_ = checkRelease(opts.release);
    if (opts.doorToken !== undefined) this.options.doorToken = opts.doorToken;
    else if (this.options.doorToken !== null && lineRules(this.release_).strictAuth) {
      // 0.5+ mints the door token again on every restart: a token kept from before is stale.
      this.options.doorToken = `mdt_${randomBytes(16).toString('hex')}`;
    }
    this.current = this.newSession(this.current.number + 1);
  }

  closeStream(): void {
    // 0.5+: the session is closing, so queued tasks are refused first (to their own streams).
    this.rejectOnStreams(this.current.runner.closeQueue());
    if (this.current.rules.drainsOnShutdown) {
      // 0.6+: no capsule-closed; every connection drains a while, then simply ends.
      const conns = [...this.tracked];
      setTimeout(() => conns.forEach((c) => this.endQuietly(c)), SHUTDOWN_DRAIN_MS).unref();
      return;
    }
    // Watchers get capsule-closed as their last frame; message/stream connections just end.
    for (const conn of [...this.tracked]) {
      this.untrack(conn);
      conn.finish(conn.isWatch ? capsuleClosedFrame() : undefined);
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const drains = this.current.rules.drainsOnShutdown;
    this.rejectOnStreams(this.current.end());
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (drains) {
      // 0.6+ shuts its door gracefully: connections drain, then end without capsule-closed.
      await new Promise((resolve) => setTimeout(resolve, SHUTDOWN_DRAIN_MS));
      for (const conn of [...this.tracked]) this.endQuietly(conn);
    }
    this.cutConnections();
    await closed;
  }

  private endQuietly(conn: Connection): void {
    this.untrack(conn);
    conn.finish();
  }

  /** Give each refused queued task's `rejected` to the message/stream that submitted it, then end that. */
  private rejectOnStreams(closed: ClosedQueueEntry[]): void {
    for (const { taskId, frame } of closed) {
      for (const conn of [...this.tracked]) {
        if (conn.ownTaskId !== taskId) continue;
        this.untrack(conn);
        conn.finish(frame);
      }
    }
  }

  private newSession(n: number): Session {
    const rules = lineRules(this.release_);
    return new Session(n, this.sessionOptions, rules, (frame, session) => this.broadcast(frame, session));
  }

  private broadcast(frame: Frame, session: Session): void {
    if (session !== this.current) return;
    const w: WrittenFrame = {
      session: session.number,
      event: frame.event,
      id: frame.id?.toString() ?? null,
      data: frame.data,
    };
    this.written.push(w);
    for (const conn of [...this.live]) conn.deliver(frame);
    this.emit('written', w);
  }
}

/** Start a simulated capsule listening on host:port (default 127.0.0.1, a free port). */
export const startSimulator = async (options: SimulatorOptions = {}): Promise<SimulatedCapsule> => {
  const host = options.host ?? '127.0.0.1';
  const server = createServer();
  const capsule = new SimCapsule(server, host, options);
  const handler = createDoorHandler(capsule);
  server.on('request', (req, res) => void handler(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return capsule;
};
