/**
 * The SSE transport's HTTP/2 sink: the same stream (heartbeats, idle controls, the per-client byte
 * bound, each protocol's end) written to one HTTP/2 stream instead of a socket. A connection here is
 * shared by every stream a page opens, so nothing is written to or closed on the socket: the head is
 * the stream's HEADERS frame, the body its DATA frames, the end its END_STREAM, and a destroy resets
 * this stream only. Connection-specific headers (`connection`, `keep-alive`, …) have no meaning in
 * HTTP/2 and are dropped (RFC 9113 §8.2.2).
 */
import { constants, type Http2ServerResponse, type ServerHttp2Stream } from 'node:http2';
import type { Context } from 'hono';
import { SseStreamBase, type SseOptions } from './sse-stream.js';

const CONNECTION_SPECIFIC = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'x-hono-already-sent',
]);

type Held = { writeHead: unknown; end: unknown };
function heldWriteHead(this: Http2ServerResponse): Http2ServerResponse {
  return this;
}
function heldEnd(this: Http2ServerResponse): Http2ServerResponse {
  return this;
}

export class H2SseStream extends SseStreamBase {
  private context: Context | null;
  private headSent = false;
  private readonly stream: ServerHttp2Stream;

  constructor(
    context: Context,
    private readonly res: Http2ServerResponse,
    private readonly status: number,
    private readonly headers: Record<string, string>,
    options: SseOptions,
  ) {
    super(options);
    this.context = context;
    this.stream = res.stream;
    // node-server must not answer the placeholder Response on this stream (as on HTTP/1.1).
    (res as unknown as Held).writeHead = heldWriteHead;
    (res as unknown as Held).end = heldEnd;
    this.stream.once('close', this.onStreamClose);
    this.stream.on('drain', this.onDrain);
    this.scheduleFlush();
  }

  private readonly onStreamClose = (): void => this.terminate();
  private readonly onDrain = (): void => this.drained();

  protected sinkQueued(): number {
    return this.stream.writableLength;
  }

  protected override sinkBlocked(): boolean {
    return this.stream.writableNeedDrain;
  }

  protected sinkStarted(): boolean {
    return this.headSent;
  }

  protected sinkReady(): boolean {
    if (this.headSent) return true;
    if (this.stream.destroyed || this.stream.headersSent) return false;
    const head: Record<string, string | string[]> = { ':status': String(this.status) };
    // Middleware headers (CORS, X-Request-Id) are on c.res once the handler has returned.
    this.context?.res.headers.forEach((value, key) => {
      if (!CONNECTION_SPECIFIC.has(key)) head[key] = value;
    });
    const cookies = this.context?.res.headers.getSetCookie() ?? [];
    if (cookies.length > 0) head['set-cookie'] = cookies;
    for (const [k, v] of Object.entries(this.headers)) {
      const key = k.toLowerCase();
      if (!CONNECTION_SPECIFIC.has(key)) head[key] = v;
    }
    this.context = null;
    this.stream.respond(head);
    this.headSent = true;
    return true;
  }

  protected sinkWrite(chunks: Buffer[]): void {
    if (!this.stream.writable) return;
    this.stream.write(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  }

  protected sinkWriteOne(chunk: Buffer): void {
    if (this.stream.writable) this.stream.write(chunk);
  }

  protected sinkEnd(chunks: Buffer[]): void {
    if (!this.stream.writable) return;
    if (chunks.length > 0) this.stream.end(Buffer.concat(chunks));
    else this.stream.end();
  }

  protected sinkDestroy(): void {
    this.stream.close(constants.NGHTTP2_CANCEL);
  }

  protected override terminate(): void {
    this.stream.off('drain', this.onDrain);
    delete (this.res as unknown as Partial<Held>).writeHead;
    delete (this.res as unknown as Partial<Held>).end;
    this.context = null;
    super.terminate();
  }
}
