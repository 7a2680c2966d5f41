/**
 * Child process of the scale benches, pinned to the client core: opens N SSE connections spread
 * over a list of targets (URL + headers: `Last-Event-ID` for a resume) and holds them. Without a
 * marker it answers `ready` once every connection has its 200 and first bytes (idle connections);
 * with one it answers `caught` once every connection has received the marker bytes (e.g. the
 * head's `id:` line of a resume storm), with the wall time of the last; those go over bare TCP
 * sockets (openRaw), the others through node:http. Driven over IPC.
 */
import http from 'node:http';
import net from 'node:net';
import { nowMs } from './fanout-event.js';

interface Target {
  url: string;
  headers?: Record<string, string>;
}

interface Open {
  targets: Target[];
  count: number;
  /** Bytes whose arrival on a connection means it has caught up. */
  marker?: string;
  /** Connections opened together; 0 = all at once (a storm). */
  batch: number;
  timeoutMs: number;
}

const reqs: { destroy(): void }[] = [];
let ended = 0;

/** One connection: resolves when it is open (no marker) or has seen the marker. */
const open = (t: Target, marker: string | undefined, timeoutMs: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = http.request(t.url, {
      agent: false,
      headers: { accept: 'text/event-stream', ...t.headers },
    });
    reqs.push(req);
    let phase = 'before the response';
    const timer = setTimeout(() => {
      reject(new Error(`not within ${timeoutMs} ms ${phase}`));
      req.destroy();
    }, timeoutMs);
    const done = (): void => {
      clearTimeout(timer);
      resolve(nowMs());
    };
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Error(`${err.code ?? err.message} ${phase}`));
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c.slice(0, 200)));
        res.on('end', () => {
          clearTimeout(timer);
          reject(new Error(`HTTP ${res.statusCode} ${body.slice(0, 160)}`));
        });
        return;
      }
      phase = 'after the response started';
      // Only the marker is looked for, in the raw bytes (no decoding, no parsing): the clients must
      // not be what is measured. `carry` holds the last bytes of the previous chunk, for a marker
      // split across two chunks.
      const needle = marker ? Buffer.from(marker, 'latin1') : null;
      let carry: Buffer | null = null;
      let caught = false;
      res.on('data', (chunk: Buffer) => {
        if (caught) return;
        if (!needle) {
          caught = true;
          return done();
        }
        const seam = carry ? Buffer.concat([carry, chunk.subarray(0, needle.length - 1)]) : null;
        if ((seam && seam.includes(needle)) || chunk.includes(needle)) {
          caught = true;
          return done();
        }
        carry = Buffer.from(chunk.subarray(Math.max(0, chunk.length - (needle.length - 1))));
      });
      res.on('end', () => ended++);
      res.on('error', () => undefined);
    });
    req.end();
  });

const CRLF2 = Buffer.from('\r\n\r\n');

/**
 * One connection on a bare TCP socket, for a marker: the request written by hand, the status read
 * from the first line, the marker looked for in the raw bytes (both answers the storm asks for have
 * their body as is on the wire: a close-delimited SSE stream, a Content-Length JSON body). Node's
 * HTTP client cost more CPU per connection than the gateway spent on it, so at thousands of
 * connections on one client core the clients, not the gateway, set the storm's time. Every read
 * lands in one buffer shared by all of this process's connections (`net`'s `onread`): a storm
 * reads 190 KB per client, and a new 64 KB Buffer per read (the 'data' event's) was garbage the
 * client core paid for. A read is scanned at once, and what must outlive it is copied.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

const openRaw = (t: Target, marker: string, timeoutMs: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const url = new URL(t.url);
    const socket = net.connect({
      host: url.hostname,
      port: Number(url.port),
      onread: {
        buffer: READ_BUFFER,
        callback: (n: number, buf: Uint8Array): boolean => {
          onChunk(Buffer.from(buf.buffer, buf.byteOffset, n));
          return true;
        },
      },
    });
    reqs.push(socket);
    let phase = 'before the response';
    const needle = Buffer.from(marker, 'latin1');
    let carry: Buffer | null = null;
    let head: Buffer | null = Buffer.alloc(0);
    let settled = false;
    const timer = setTimeout(() => fail(`not within ${timeoutMs} ms ${phase}`), timeoutMs);
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(new Error(why));
      socket.destroy();
    };
    const headers = Object.entries({ accept: 'text/event-stream', ...t.headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n${headers}\r\n`);
    const onChunk = (chunk: Buffer): void => {
      if (settled) return;
      if (head) {
        // Until the head is complete: its status decides (anything but 200 fails with its body).
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf(CRLF2);
        if (end < 0) return;
        const status = head.toString('latin1', 9, 12);
        if (status !== '200') {
          fail(`HTTP ${status} ${head.toString('utf8', end + 4, end + 4 + 160)}`);
          return;
        }
        phase = 'after the response started';
        chunk = head.subarray(end + 4);
        head = null;
      }
      const seam = carry ? Buffer.concat([carry, chunk.subarray(0, needle.length - 1)]) : null;
      if ((seam && seam.includes(needle)) || chunk.includes(needle)) {
        settled = true;
        clearTimeout(timer);
        resolve(nowMs());
        return;
      }
      carry = Buffer.from(chunk.subarray(Math.max(0, chunk.length - (needle.length - 1))));
    };
    socket.on('error', (err: NodeJS.ErrnoException) => fail(`${err.code ?? err.message} ${phase}`));
    socket.on('end', () => {
      ended++;
      fail(`closed ${phase}`);
    });
  });

process.on('message', (msg: { type: string } & Partial<Open>) => {
  if (msg.type === 'ping') {
    process.send?.({ type: 'pong' });
  } else if (msg.type === 'open') {
    const { targets, count, marker, batch, timeoutMs } = msg as Open;
    const started = nowMs();
    void (async () => {
      let last = 0;
      let failed = 0;
      // Failures by kind (error code and phase, or status and body): what went wrong, not just how often.
      const errors = new Map<string, number>();
      const step = batch > 0 ? batch : count;
      for (let i = 0; i < count; i += step) {
        const n = Math.min(step, count - i);
        const got = await Promise.allSettled(
          Array.from({ length: n }, (_, k) => {
            const target = targets[(i + k) % targets.length]!;
            return marker ? openRaw(target, marker, timeoutMs) : open(target, marker, timeoutMs);
          }),
        );
        for (const g of got) {
          if (g.status === 'fulfilled') last = Math.max(last, g.value);
          else {
            failed++;
            const kind = String((g.reason as Error).message ?? g.reason);
            errors.set(kind, (errors.get(kind) ?? 0) + 1);
          }
        }
      }
      process.send?.({ type: marker ? 'caught' : 'ready', started, last, failed, errors: [...errors] });
    })();
  } else if (msg.type === 'report') {
    process.send?.({ type: 'report', ended, open: reqs.length - ended });
  } else if (msg.type === 'stop') {
    for (const r of reqs) r.destroy();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
