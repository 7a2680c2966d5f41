/**
 * The local stand-in for src/http/sse-transport.ts's `startSse` (same shape, the subset Flue uses),
 * until that transport is committed: pre-encoded bytes into a Web stream, one heartbeat timer and
 * one idle timer per connection, a bound on bytes the client has not taken. Swapping it for the
 * transport is an import change in live.ts.
 */
import type { Context } from 'hono';

export interface SinkOptions {
  status?: number;
  headers?: Record<string, string>;
  heartbeat?: { bytes: Buffer; everyMs: number };
  idle?: { everyMs: number; onIdle: () => void };
  maxQueuedBytes?: number;
  onOverflow?: () => Buffer | null;
}

export interface SseSink {
  readonly open: boolean;
  write(bytes: Buffer): void;
  end(last?: Buffer): void;
  onClose(fn: () => void): void;
}

const DEFAULT_MAX_QUEUED_BYTES = 1024 * 1024;

export const startSse = (c: Context, options: SinkOptions = {}): { stream: SseSink; response: Response } => {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const closers: (() => void)[] = [];
  let open = true;
  /** Bytes written whose write has not been taken by the response body yet. */
  let queued = 0;
  const maxQueued = options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES;
  let idleTimer: NodeJS.Timeout | null = null;

  const finish = (): void => {
    if (!open) return;
    open = false;
    if (heartbeat) clearInterval(heartbeat);
    if (idleTimer) clearTimeout(idleTimer);
    c.req.raw.signal.removeEventListener('abort', finish);
    writer.close().catch(() => undefined);
    for (const fn of closers.splice(0)) fn();
  };
  const armIdle = (): void => {
    const idle = options.idle;
    if (!idle || !open) return;
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      idleTimer = null;
      idle.onIdle();
      armIdle();
    }, idle.everyMs);
  };
  const put = (bytes: Buffer): void => {
    if (!open) return;
    if (queued + bytes.length > maxQueued) {
      // Past the bound the client cannot keep up: end it; it resumes from its last offset.
      const last = options.onOverflow?.() ?? null;
      if (last) writer.write(last).catch(() => undefined);
      finish();
      return;
    }
    queued += bytes.length;
    writer.write(bytes).then(() => (queued -= bytes.length), finish);
  };
  const heartbeatBytes = options.heartbeat?.bytes;
  const heartbeat =
    options.heartbeat && heartbeatBytes
      ? setInterval(() => put(heartbeatBytes), options.heartbeat.everyMs)
      : null;
  c.req.raw.signal.addEventListener('abort', finish, { once: true });
  armIdle();

  const stream: SseSink = {
    get open() {
      return open;
    },
    write(bytes) {
      put(bytes);
      armIdle();
    },
    end(last) {
      if (last) put(last);
      finish();
    },
    onClose(fn) {
      if (open) closers.push(fn);
      else fn();
    },
  };
  const headers = {
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache',
    ...options.headers,
  };
  return { stream, response: new Response(readable, { status: options.status ?? 200, headers }) };
};
