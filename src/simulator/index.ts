/**
 * A simulated Murmur capsule (spec murmur-streaming-protocol.md, quirks included) for tests and the
 * demo: `startSimulator()` serves the door on 127.0.0.1 and exposes control hooks (cut, restart,
 * closeStream, stop). Wire details live in server.ts / frames.ts; task scripts in script.ts.
 */
import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { capsuleClosedFrame, type Frame } from './frames.js';
import { createDoorHandler, type DoorHost, type DoorOptions } from './server.js';
import { Session, type SessionOptions } from './session.js';
import type { Connection } from './connection.js';
import type { TaskOutcome } from './tasks.js';

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
  submit(text: string, contextId?: string): TaskHandle;
  idle(): Promise<void>;
  cutConnections(): void;
  restart(): Promise<void>;
  closeStream(): void;
  stop(): Promise<void>;
}

class SimCapsule extends EventEmitter implements SimulatedCapsule, DoorHost {
  readonly written: WrittenFrame[] = [];
  readonly options: DoorOptions;
  current: Session;
  private readonly sessionOptions: SessionOptions;
  private readonly sockets = new Set<Socket>();
  private readonly tracked = new Set<Connection>();
  /** What watch connections that are gone had dropped (see droppedToWatchers). */
  private droppedByGone = 0;
  private readonly live = new Set<Connection>();
  private stopped = false;
  private boundPort: number | undefined;

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

  async restart(): Promise<void> {
    // A process restart: sockets drop without capsule-closed; a fresh session resets buffer and counters.
    this.current.end();
    this.cutConnections();
    this.current = this.newSession(this.current.number + 1);
  }

  closeStream(): void {
    // Watchers get capsule-closed as their last frame; message/stream connections just end.
    for (const conn of [...this.tracked]) {
      this.untrack(conn);
      conn.finish(conn.isWatch ? capsuleClosedFrame() : undefined);
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.current.end();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.cutConnections();
    await closed;
  }

  private newSession(n: number): Session {
    return new Session(n, this.sessionOptions, (frame, session) => this.broadcast(frame, session));
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
