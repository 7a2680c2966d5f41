/**
 * The one SSE transport of the three surfaces. Surfaces hand it pre-encoded Buffers; it writes them
 * straight to the Node response behind the Hono context (one write per connection per event-loop
 * turn), runs heartbeats and idle callbacks from the shared timer wheel, and bounds what a slow
 * client can make us hold: past `maxQueuedBytes` the stream is ended with the protocol's closing
 * bytes and the client resumes from its cursor. Without a Node response (Hono `app.request` in unit
 * tests) the same stream is served as a ReadableStream body (sse-web-stream.ts).
 *
 * Per connection: one object, one pending array, one 'close' listener, at most two wheel entries. No
 * timer, closure or promise per write.
 */
import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import { Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import type { Context } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { SseStreamBase, type SseOptions, type SseStream } from './sse-stream.js';
import { H2SseStream } from './sse-h2-stream.js';
import { startWebSse } from './sse-web-stream.js';
import { writeToSocket } from './socket-write.js';
import { releaseHttp1 } from './http1-release.js';

export { SSE_DEFAULTS, sseStats, type SseOptions, type SseStream } from './sse-stream.js';

type NodeEnv = { outgoing?: ServerResponse | Http2ServerResponse } | undefined;

/** More chunks than this in one batch are copied into one Buffer (a held backlog), however many bytes. */
const COALESCE_OVER = 16;
/**
 * A batch of at most this many bytes is copied into one Buffer and written plainly, however many
 * chunks it holds. A busy capsule's BeeOS and Flue followers get a few slices per turn each (a
 * conversation's chunks arrive together): corked, each batch went through the stream's buffered
 * list and a writev, which cost more CPU than the send itself; a copy of a kilobyte or two costs
 * next to nothing. Bigger batches (a storm's catch-up pages) are still corked, not copied.
 */
const COPY_UNDER = 16 * 1024;

/** The transport's own headers; the surface's options.headers and the context's headers join them. */
const BASE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

/** Headers the context holds that describe Hono's placeholder, not this stream. */
const SKIP_HEADERS = new Set(['content-type', 'content-length', 'x-hono-already-sent', 'transfer-encoding']);

/*
 * @hono/node-server answers a Response that went through Hono's context setter (any middleware that
 * touched c.res first, e.g. CORS) by its cached-response path, which writes a head and ends the
 * response without looking at the already-sent marker. While the transport owns a response, its own
 * writeHead/end stand in for node-server's calls (shared functions, no closure per connection); the
 * transport writes through the prototype's.
 */
function heldWriteHead(this: ServerResponse): ServerResponse {
  return this;
}
function heldEnd(this: ServerResponse): ServerResponse {
  return this;
}
type Held = { writeHead: unknown; end: unknown };
const hold = (res: ServerResponse): void => {
  (res as unknown as Held).writeHead = heldWriteHead;
  (res as unknown as Held).end = heldEnd;
};
const release = (res: ServerResponse): void => {
  delete (res as unknown as Partial<Held>).writeHead;
  delete (res as unknown as Partial<Held>).end;
};

/**
 * The Node path: bytes go straight to the socket, the response delimited by the connection's close
 * (`Connection: close`, no chunked framing). A fan-out writes the same event bytes to every client:
 * written as they are, one Buffer serves every socket, with no per-connection chunk header, no
 * writev of three pieces and none of ServerResponse's per-write bookkeeping (a third of the user
 * CPU per delivered event). A stream ends only when its connection does, so nothing is lost by not
 * keeping it alive. The head goes out with the first flush.
 */
/** The stream a socket or response belongs to, for the shared listeners below. */
const kStream = Symbol('sseStream');
type Owned = { [kStream]?: NodeSseStream | null };

/*
 * Shared listeners, not a closure per stream (two closures and their contexts, per follower).
 * 'close' fires once, so plain `on` (a `once` costs a wrapper and its state object too).
 */
function onResponseClose(this: Owned): void {
  this[kStream]?.responseClosed();
}
function onSocketDrain(this: Owned): void {
  this[kStream]?.drainedSocket();
}

class NodeSseStream extends SseStreamBase {
  private context: Context | null;
  private head: Buffer | null = null;
  private headSent = false;
  private readonly socket: Socket;

  constructor(
    context: Context,
    private readonly res: ServerResponse,
    private readonly status: number,
    private readonly extraHeaders: Record<string, string> | undefined,
    options: SseOptions,
  ) {
    super(options);
    this.context = context;
    this.socket = res.socket as Socket;
    hold(res);
    (res as Owned)[kStream] = this;
    (this.socket as Owned)[kStream] = this;
    res.on('close', onResponseClose);
    this.socket.on('drain', onSocketDrain);
    // Nothing written yet still sends the head on the first flush (a client sees the response start).
    this.scheduleFlush();
  }

  /** The response closed (its socket did). */
  responseClosed(): void {
    this.terminate();
  }

  /** The socket took what it held. */
  drainedSocket(): void {
    this.drained();
  }

  protected sinkQueued(): number {
    return this.socket.writableLength;
  }

  protected override sinkBlocked(): boolean {
    return this.socket.writableNeedDrain;
  }

  protected sinkStarted(): boolean {
    return this.headSent;
  }

  protected sinkReady(): boolean {
    if (this.headSent) return true;
    // The first flush pass runs in a setImmediate after startSse: the handler has returned by then
    // (call startSse just before returning) and middleware after next() ran in the microtasks that
    // followed, so their headers (CORS Vary, X-Request-Id) are on c.res.
    if (this.context) this.head = this.buildHead(this.context);
    this.headSent = true;
    // From here on the response is this socket's bytes until it closes: Node's parser, request and
    // response state are let go of (http1-release.ts), a third of what an idle follower cost.
    releaseHttp1(this.res);
    // Accepted sockets get TCP keep-alive after `downstream.keepAliveMs` (1 s) of silence, for
    // parked long-polls. A live stream is silent only between heartbeats, and was probed every
    // second in between: at 19,500 idle followers 39,000 packets a second on loopback, whose bursts
    // overflowed the backlog until the kernel aborted a few hundred connections. Past twice the
    // heartbeat a healthy stream is never idle (the client's ACK of each heartbeat resets the
    // delay); a dead client is found by the send-stall watch once a heartbeat goes unacknowledged.
    if (this.heartbeatMs > 0) this.socket.setKeepAlive(true, 2 * this.heartbeatMs);
    return true;
  }

  private buildHead(c: Context): Buffer {
    this.context = null;
    const headers = new Map<string, string | string[]>();
    c.res.headers.forEach((value, key) => {
      if (!SKIP_HEADERS.has(key)) headers.set(key, value);
    });
    const cookies = c.res.headers.getSetCookie();
    if (cookies.length > 0) headers.set('set-cookie', cookies);
    for (const [k, v] of Object.entries(BASE_HEADERS)) headers.set(k, v);
    if (this.extraHeaders)
      for (const [k, v] of Object.entries(this.extraHeaders)) headers.set(k.toLowerCase(), v);
    // The Murmur wire's own header (spec "Endpoints": keep-alive, no content-length, the body ends
    // when the connection closes); a close-delimited body is read to the close whatever it says.
    headers.set('connection', 'keep-alive');
    let text = `HTTP/1.1 ${this.status} ${STATUS_CODES[this.status] ?? ''}\r\ndate: ${new Date().toUTCString()}\r\n`;
    for (const [k, v] of headers) {
      for (const one of Array.isArray(v) ? v : [v]) text += `${k}: ${one.replace(/[\r\n]/g, ' ')}\r\n`;
    }
    return Buffer.from(`${text}\r\n`, 'latin1');
  }

  /**
   * One turn's bytes (the head first, if it is still due) in one batch: a single Buffer is one plain
   * write (the fan-out case: the same event bytes for every client); a few small ones, or a held
   * backlog of many, are copied into one Buffer (COPY_UNDER, COALESCE_OVER); a few big ones are
   * corked into one writev, not copied (a storm's catch-up writes pages of hundreds of KB per client).
   */
  private writeBatch(chunks: Buffer[], end: boolean): void {
    const head = this.head;
    this.head = null;
    if (head) chunks.unshift(head);
    const socket = this.socket;
    if (!socket.writable) return;
    if (chunks.length === 1 && !end) {
      writeToSocket(socket, chunks[0]!);
      return;
    }
    let bytes = 0;
    for (const chunk of chunks) bytes += chunk.length;
    if (chunks.length > COALESCE_OVER || bytes <= COPY_UNDER) {
      // One Buffer: a few small slices cost less copied than corked, and a backlog held while the
      // client did not read keeps one socket entry however long the client takes to drain it.
      const all = Buffer.concat(chunks, bytes);
      if (end) socket.end(all);
      else writeToSocket(socket, all);
      return;
    }
    socket.cork();
    for (const chunk of chunks) if (chunk.length > 0) socket.write(chunk);
    if (end) socket.end();
    else socket.uncork();
  }

  protected sinkWrite(chunks: Buffer[]): void {
    this.writeBatch(chunks, false);
  }

  protected sinkWriteOne(chunk: Buffer): void {
    if (this.head) this.writeBatch([chunk], false);
    else if (this.socket.writable) writeToSocket(this.socket, chunk);
  }

  protected sinkEnd(chunks: Buffer[]): void {
    this.writeBatch(chunks, true);
  }

  protected sinkDestroy(): void {
    this.socket.destroy();
  }

  protected override flushHead(): void {
    if (this.head) this.writeBatch([], false);
  }

  protected override terminate(): void {
    this.socket.off('drain', onSocketDrain);
    (this.socket as Owned)[kStream] = null;
    (this.res as Owned)[kStream] = null;
    // Abandoned before its head (the handler answers otherwise): node-server writes that answer.
    release(this.res);
    this.context = null;
    super.terminate();
  }
}

/**
 * Open an SSE response on the Node socket behind this Hono context (c.env.outgoing); returns the
 * stream and the Response the handler must return. Without a Node socket (app.request in unit tests)
 * it falls back to a ReadableStream body with the same semantics.
 */
export const startSse = (c: Context, options: SseOptions = {}): { stream: SseStream; response: Response } => {
  const res = (c.env as NodeEnv)?.outgoing;
  const status = options.status ?? 200;
  if (!res || typeof res.writeHead !== 'function') return startWebSse(c, status, options);
  const stream =
    res instanceof Http2ServerResponse
      ? new H2SseStream(c, res, status, { ...BASE_HEADERS, ...options.headers }, options)
      : new NodeSseStream(c, res, status, options.headers, options);
  // A fresh placeholder per request: middleware set headers on c.res, and the shared constant would
  // carry one request's headers into the next.
  const response = new Response(null, { headers: RESPONSE_ALREADY_SENT.headers });
  return { stream, response };
};
