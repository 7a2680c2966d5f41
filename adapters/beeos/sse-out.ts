/**
 * The one seam between the BeeOS streams and the SSE transport: open a `text/event-stream` answer
 * on the request's context and get a stream that takes pre-encoded bytes. Everything else in the
 * surface writes Buffers to a `BeeosSse` and never sees how they reach the socket.
 */
import type { Context } from 'hono';
import { HEADER_REQUEST_ID } from './constants.js';

export interface BeeosSse {
  readonly open: boolean;
  write(bytes: Buffer): void;
  /** Write `last` (if any) after what is queued, then end the response. */
  end(last?: Buffer): void;
  onClose(fn: () => void): void;
  /** The client is behind: a producer that can wait (a replay) should, until waitDrain resolves. */
  readonly backedUp: boolean;
  waitDrain(): Promise<void>;
}

export interface BeeosSseOptions {
  /** Comment bytes written every `everyMs` from open. */
  heartbeat?: { bytes: Buffer; everyMs: number };
  /** Bound on bytes queued for the client (default 1 MiB); past it the stream ends. */
  maxQueuedBytes?: number;
  /** The bytes to close an overflowing stream with (null: just end it). */
  onOverflow?: () => Buffer | null;
}

const DEFAULT_MAX_QUEUED = 1 << 20;

const HEADERS: Record<string, string> = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  Connection: 'keep-alive',
};

/**
 * Until src/http/sse-transport.ts exists: a byte-counted ReadableStream body with the transport's
 * semantics (bounded queue, overflow ends the stream, close callbacks run once).
 */
class WebStreamSse implements BeeosSse {
  readonly body: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private cleanups: (() => void)[] = [];
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private waiters: (() => void)[] = [];
  private readonly limit: number;
  private readonly mark: number;

  constructor(
    signal: AbortSignal,
    private readonly options: BeeosSseOptions,
  ) {
    const limit = (this.limit = options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED);
    this.mark = Math.min(64 * 1024, limit / 2);
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          this.controller = c;
        },
        pull: () => {
          if (!this.backedUp) this.release();
        },
        cancel: () => this.finish(),
      },
      // The high-water mark is the byte bound: desiredSize < 0 means the client is past it.
      new ByteLengthQueuingStrategy({ highWaterMark: limit }),
    );
    if (signal.aborted) queueMicrotask(() => this.finish());
    else signal.addEventListener('abort', () => this.finish(), { once: true });
    const hb = options.heartbeat;
    if (hb) this.timer = setInterval(() => this.write(hb.bytes), hb.everyMs);
  }

  get open(): boolean {
    return !this.closed;
  }

  get backedUp(): boolean {
    return !this.closed && this.limit - (this.controller.desiredSize ?? 0) > this.mark;
  }

  waitDrain(): Promise<void> {
    if (!this.backedUp) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private release(): void {
    for (const fn of this.waiters.splice(0)) fn();
  }

  onClose(fn: () => void): void {
    if (this.closed) fn();
    else this.cleanups.push(fn);
  }

  write(bytes: Buffer): void {
    if (this.closed) return;
    this.controller.enqueue(bytes);
    if ((this.controller.desiredSize ?? 0) < 0) {
      const last = this.options.onOverflow?.() ?? null;
      this.end(last ?? undefined);
    }
  }

  end(last?: Buffer): void {
    if (this.closed) return;
    if (last) this.controller.enqueue(last);
    try {
      this.controller.close();
    } catch {
      // cancelled by the client meanwhile
    }
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.release();
    for (const fn of this.cleanups.splice(0)) fn();
  }
}

/** Open the SSE answer of `c`: the stream to write to and the Response the handler returns. */
export const openSse = (c: Context, options: BeeosSseOptions): { stream: BeeosSse; response: Response } => {
  const stream = new WebStreamSse(c.req.raw.signal, options);
  const headers: Record<string, string> = { ...HEADERS };
  const rid = c.get('requestId') as string | undefined;
  if (rid) headers[HEADER_REQUEST_ID] = rid;
  return { stream, response: new Response(stream.body, { status: 200, headers }) };
};
