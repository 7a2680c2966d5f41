/**
 * A raw HTTP/1.1 client over node:net for simulator tests: sends exact bytes, keeps the response
 * head verbatim, de-chunks the body and splits it into SSE blocks as bytes arrive.
 */
import { connect, type Socket } from 'node:net';
import { StringDecoder } from 'node:string_decoder';

export interface RawBlock {
  /** The block's text without the terminating blank line. */
  raw: string;
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

export interface RawRequest {
  body?: string;
  headers?: Record<string, string>;
  path?: string;
  method?: string;
}

export class RawResponse {
  head = '';
  status = 0;
  /** Header lines as received (name case preserved). */
  headerLines: string[] = [];
  /** The de-chunked body text received so far. */
  body = '';
  blocks: RawBlock[] = [];
  closed = false;
  readonly socket: Socket;
  private raw = Buffer.alloc(0);
  private headDone = false;
  private chunked = false;
  private remaining = 0;
  private pendingText = '';
  private readonly decoder = new StringDecoder('utf8');
  private waiters: { check: () => boolean; resolve: () => void; reject: (e: Error) => void; what: string }[] =
    [];

  constructor(port: number, req: RawRequest) {
    this.socket = connect(port, '127.0.0.1');
    const body = req.body ?? '';
    const headers = { host: `127.0.0.1:${port}`, ...(req.headers ?? {}) };
    let text = `${req.method ?? 'POST'} ${req.path ?? '/'} HTTP/1.1\r\n`;
    for (const [k, v] of Object.entries(headers)) text += `${k}: ${v}\r\n`;
    text += `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    this.socket.write(text);
    this.socket.on('data', (d: Buffer) => this.onData(d));
    this.socket.on('close', () => {
      this.closed = true;
      this.settle();
    });
    this.socket.on('error', () => {});
  }

  /** Frames (blocks with an event line), heartbeats excluded. */
  get frames(): RawBlock[] {
    return this.blocks.filter((b) => b.event !== undefined);
  }

  get heartbeats(): number {
    return this.blocks.filter((b) => b.comment === 'heartbeat').length;
  }

  header(name: string): string | undefined {
    const line = this.headerLines.find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
    return line?.slice(line.indexOf(':') + 1).trim();
  }

  /** Resolve when `check` holds; reject if the connection closes first. */
  waitFor(check: () => boolean, what: string): Promise<void> {
    if (check()) return Promise.resolve();
    if (this.closed) return Promise.reject(this.failure(what));
    return new Promise((resolve, reject) => this.waiters.push({ check, resolve, reject, what }));
  }

  waitFrames(n: number): Promise<void> {
    return this.waitFor(() => this.frames.length >= n, `${n} frames`);
  }

  /** Resolves when the server closed the connection. */
  ended(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => this.socket.once('close', () => resolve()));
  }

  close(): void {
    this.socket.destroy();
  }

  private failure(what: string): Error {
    return new Error(`connection closed before ${what}; body so far:\n${this.body.slice(-2000)}`);
  }

  private settle(): void {
    const pending = this.waiters;
    this.waiters = [];
    for (const w of pending) {
      if (w.check()) w.resolve();
      else if (this.closed) w.reject(this.failure(w.what));
      else this.waiters.push(w);
    }
  }

  private onData(d: Buffer): void {
    this.raw = Buffer.concat([this.raw, d]);
    if (!this.headDone) {
      const end = this.raw.indexOf('\r\n\r\n');
      if (end < 0) return;
      this.head = this.raw.subarray(0, end).toString('latin1');
      this.raw = this.raw.subarray(end + 4);
      const [statusLine, ...lines] = this.head.split('\r\n');
      this.status = Number(statusLine?.split(' ')[1]);
      this.headerLines = lines;
      this.chunked = this.header('transfer-encoding')?.toLowerCase() === 'chunked';
      this.remaining = Number(this.header('content-length') ?? 0);
      this.headDone = true;
    }
    this.consumeBody();
    this.settle();
  }

  private consumeBody(): void {
    if (!this.chunked) {
      const take = this.raw.subarray(0, this.remaining);
      this.remaining -= take.length;
      this.raw = this.raw.subarray(take.length);
      this.pushText(this.decoder.write(take));
      return;
    }
    for (;;) {
      if (this.remaining === 0) {
        const eol = this.raw.indexOf('\r\n');
        if (eol < 0) return;
        const size = parseInt(this.raw.subarray(0, eol).toString('latin1'), 16);
        if (size === 0) return;
        this.raw = this.raw.subarray(eol + 2);
        this.remaining = size + 2; // data + CRLF
      }
      if (this.raw.length === 0) return;
      const take = this.raw.subarray(0, this.remaining);
      this.raw = this.raw.subarray(take.length);
      this.remaining -= take.length;
      // The two trailing bytes of a chunk are its CRLF, not data.
      const dataEnd = Math.max(0, take.length - Math.max(0, 2 - this.remaining));
      this.pushText(this.decoder.write(take.subarray(0, dataEnd)));
    }
  }

  private pushText(text: string): void {
    this.body += text;
    // Scan only the new text (plus one char) so a huge frame arriving in pieces stays linear.
    const from = Math.max(0, this.pendingText.length - 1);
    this.pendingText += text;
    let idx = this.pendingText.indexOf('\n\n', from);
    for (; idx >= 0; idx = this.pendingText.indexOf('\n\n')) {
      const raw = this.pendingText.slice(0, idx);
      this.pendingText = this.pendingText.slice(idx + 2);
      const block: RawBlock = { raw };
      for (const line of raw.split('\n')) {
        if (line.startsWith(':')) block.comment = line.slice(1);
        else if (line.startsWith('id: ')) block.id = line.slice(4);
        else if (line.startsWith('event: ')) block.event = line.slice(7);
        else if (line.startsWith('data: ')) block.data = line.slice(6);
      }
      this.blocks.push(block);
    }
  }
}

/** Send a request and return the live response. */
export const rawRequest = (port: number, req: RawRequest = {}): RawResponse => new RawResponse(port, req);

/** A JSON-RPC body. */
export const rpc = (method: string, params: unknown = {}, id: unknown = 1): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method, params });

/** A message/stream body carrying one text part. */
export const messageBody = (text: string, extra: Record<string, unknown> = {}): string =>
  rpc('message/stream', { message: { messageId: 'msg-1', role: 'user', parts: [{ text }], ...extra } });

export const JSON_CT = { 'content-type': 'application/json' };

/** POST / with a JSON body. */
export const post = (port: number, body: string, headers: Record<string, string> = {}): RawResponse =>
  rawRequest(port, { body, headers: { ...JSON_CT, ...headers } });
