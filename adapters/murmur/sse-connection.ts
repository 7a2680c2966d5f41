/**
 * One downstream SSE connection: a byte stream Hono serves, the heartbeat timer (spec "Heartbeat":
 * from connection open, not reset by frames) and write coalescing. Everything written during one
 * event-loop turn leaves as one chunk: one socket write per connection per turn, not one per frame.
 * What to write is feed.ts's and the endpoints'.
 */
import { HEARTBEAT_BYTES } from './codec.js';

/** Bytes buffered in the stream before the connection counts as backed up (a slow reader). */
const HIGH_WATER_BYTES = 256 * 1024;

// One flush pass per turn for every connection with pending bytes (cheaper than a timer each).
const dirty = new Set<SseConnection>();
let flushScheduled = false;
const flushAll = (): void => {
  flushScheduled = false;
  const list = [...dirty];
  dirty.clear();
  for (const conn of list) conn.flush();
};
const scheduleFlush = (conn: SseConnection): void => {
  dirty.add(conn);
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushAll);
  }
};

export interface SseConnectionOptions {
  heartbeatMs: number;
  /** The request's signal: aborted when the client goes away. */
  signal: AbortSignal;
}

export class SseConnection {
  readonly stream: ReadableStream<Uint8Array>;
  /** Settles once the connection is over (closed by us, or the client went away). */
  readonly done: Promise<void>;
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  private pending: Uint8Array[] = [];
  private ending = false;
  private terminated = false;
  private drainWaiters: (() => void)[] = [];
  private readonly heartbeat: NodeJS.Timeout;
  private resolveDone!: () => void;
  private readonly onAbort = (): void => this.terminate();

  constructor(private readonly options: SseConnectionOptions) {
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        pull: () => this.releaseDrainWaiters(),
        cancel: () => this.terminate(),
      },
      { highWaterMark: HIGH_WATER_BYTES, size: (chunk) => chunk.byteLength },
    );
    this.heartbeat = setInterval(() => this.write(HEARTBEAT_BYTES), options.heartbeatMs);
    if (options.signal.aborted) this.terminate();
    else options.signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /** False once the connection is ending or over: nothing more will be written. */
  get open(): boolean {
    return !this.ending && !this.terminated;
  }

  /** Whether the client is not reading fast enough (the stream buffer is past its mark). */
  get backedUp(): boolean {
    return (this.controller?.desiredSize ?? 1) <= 0;
  }

  /** Queue bytes; they leave with everything else written this turn. */
  write(bytes: Uint8Array): void {
    if (!this.open) return;
    this.pending.push(bytes);
    scheduleFlush(this);
  }

  /** Queue several chunks (one delivered batch) at once. */
  writeAll(chunks: readonly Uint8Array[]): void {
    if (!this.open || chunks.length === 0) return;
    for (const chunk of chunks) this.pending.push(chunk);
    scheduleFlush(this);
  }

  /** Write what is pending, then end the response (the client sees end of stream). */
  end(): void {
    if (!this.open) return;
    this.ending = true;
    scheduleFlush(this);
  }

  /** Resolves when the client has read enough to take more, or the connection is over. */
  waitDrain(): Promise<void> {
    if (this.terminated || !this.backedUp) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Abandon the connection without writing more (e.g. the answer turned out to be JSON). */
  discard(): void {
    this.terminate();
  }

  /** Called by the flush pass: one enqueue of everything pending. */
  flush(): void {
    if (this.terminated || !this.controller) return;
    const { pending } = this;
    if (pending.length > 0) {
      this.pending = [];
      const chunk = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
      try {
        this.controller.enqueue(chunk);
      } catch {
        this.terminate();
        return;
      }
    }
    if (this.ending) {
      try {
        this.controller.close();
      } catch {
        // already closed by a cancel racing us
      }
      this.terminate();
    }
  }

  private releaseDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const resolve of waiters) resolve();
  }

  private terminate(): void {
    if (this.terminated) return;
    this.terminated = true;
    clearInterval(this.heartbeat);
    dirty.delete(this);
    this.pending = [];
    this.options.signal.removeEventListener('abort', this.onAbort);
    this.releaseDrainWaiters();
    this.resolveDone();
  }
}
