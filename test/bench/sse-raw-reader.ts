/**
 * The bench clients' SSE reader (fanout-clients.ts): a plain TCP socket, the request written by
 * hand, the response's chunked framing undone by a small state machine, and the bytes handed over
 * in complete events. With Node's HTTP client (its parser, two streams and a string decode per read)
 * the client core saturated at 1,000 × 100 for every target, nchan's included, so the clients set
 * the pace and the servers' figures meant little (nginx, its writes backing up, showed 4.6 µs per
 * event; read promptly it spends 8.0). Here each read lands in one reused buffer (`net` `onread`):
 * no stream, no string. The client core then runs at 80–89 % there, 43–46 % at 1,000 × 40 (52–56 %
 * before).
 */
import net from 'node:net';

export interface RawSseHandlers {
  /** Response head read: its status code (the stream is read on only when it is 200). */
  onStatus(status: number): void;
  /** Complete events: `bytes[0, end)` ends with a blank line. Valid during the call only. */
  onEvents(bytes: Buffer, end: number): void;
  /** The server ended the response, or closed the connection, after a 200. */
  onEnd(): void;
  onError(err: Error): void;
}

const CR = 13;
const LF = 10;
const READ_BUFFER = 64 * 1024;

/** Index of the last `\n\n` in `buf[0, end)` plus 2 (the end of the last complete event), or 0. */
const lastEventEnd = (buf: Buffer, end: number): number => {
  for (let i = end - 1; i > 0; i--) if (buf[i] === LF && buf[i - 1] === LF) return i + 1;
  return 0;
};

const hexDigit = (c: number): number =>
  c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;

/** A response body, fed as it is read: chunked framing undone, complete events handed over. */
export class SseBody {
  // Chunked framing: a size line being read (`size` so far), `left` data bytes, or the CRLF after them.
  private left = 0;
  private size = 0;
  private skipToLf = false;
  private crlfAfterData = 0;
  /** Event bytes not handed over yet (the incomplete last event). */
  private pending = Buffer.allocUnsafe(READ_BUFFER);
  private used = 0;
  ended = false;

  constructor(
    private readonly chunked: boolean,
    private readonly onEvents: (bytes: Buffer, end: number) => void,
    private readonly onLastChunk: () => void,
  ) {}

  push(buf: Buffer, from: number, to: number): void {
    if (this.ended) return;
    if (this.chunked) this.dechunk(buf, from, to);
    else this.take(buf, from, to);
    const end = lastEventEnd(this.pending, this.used);
    if (end > 0) {
      this.onEvents(this.pending, end);
      this.pending.copy(this.pending, 0, end, this.used);
      this.used -= end;
    }
    // After the events it carried: the last chunk ends the response.
    if (this.ended) this.onLastChunk();
  }

  private take(buf: Buffer, from: number, to: number): void {
    const n = to - from;
    if (n <= 0) return;
    if (this.used + n > this.pending.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.pending.length * 2, this.used + n));
      this.pending.copy(grown, 0, 0, this.used);
      this.pending = grown;
    }
    buf.copy(this.pending, this.used, from, to);
    this.used += n;
  }

  private dechunk(buf: Buffer, from: number, to: number): void {
    let i = from;
    while (i < to && !this.ended) {
      if (this.crlfAfterData > 0) {
        i++;
        this.crlfAfterData--;
      } else if (this.left > 0) {
        const stop = Math.min(to, i + this.left);
        this.take(buf, i, stop);
        this.left -= stop - i;
        i = stop;
        if (this.left === 0) this.crlfAfterData = 2;
      } else {
        // A size line: hex digits, maybe `;extensions`, then CRLF.
        const c = buf[i++]!;
        if (c === LF) {
          if (this.size === 0) this.ended = true; // the last chunk
          this.left = this.size;
          this.size = 0;
          this.skipToLf = false;
        } else if (!this.skipToLf && c !== CR) {
          const d = hexDigit(c);
          if (d < 0) this.skipToLf = true;
          else this.size = this.size * 16 + d;
        }
      }
    }
  }
}

export const openRawSse = (url: string, handlers: RawSseHandlers): net.Socket => {
  const { hostname, port, pathname, search } = new URL(url);
  const request =
    `GET ${pathname}${search} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n` +
    `Accept: text/event-stream\r\nConnection: keep-alive\r\n\r\n`;
  let head: Buffer | null = Buffer.alloc(0);
  let body: SseBody | null = null;
  let done = false;
  /** Counted once, and only for a response that started (a refused connection is an error). */
  const finish = (): void => {
    if (!body || done) return;
    done = true;
    handlers.onEnd();
  };

  const socket = net.connect({
    host: hostname,
    port: Number(port),
    onread: {
      buffer: Buffer.allocUnsafe(READ_BUFFER),
      callback: (nread: number, buf: Uint8Array): boolean => {
        if (body) {
          body.push(buf as Buffer, 0, nread);
          return true;
        }
        head = Buffer.concat([head!, buf.subarray(0, nread)]);
        const at = head.indexOf('\r\n\r\n');
        if (at < 0) return true;
        const text = head.subarray(0, at).toString('latin1');
        const rest = head.subarray(at + 4);
        head = null;
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
        handlers.onStatus(status);
        if (status !== 200) {
          socket.destroy();
          return false;
        }
        body = new SseBody(/\r\ntransfer-encoding:\s*chunked/i.test(text), handlers.onEvents, finish);
        body.push(rest, 0, rest.length);
        return true;
      },
    },
  } as net.NetConnectOpts);
  socket.setNoDelay(true);
  socket.on('connect', () => socket.write(request));
  socket.on('end', finish);
  socket.on('close', finish);
  socket.on('error', (err) => handlers.onError(err));
  return socket;
};
