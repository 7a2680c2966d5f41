/**
 * The SSE transport over real loopback HTTP: headers from middleware kept, heartbeats on the shared
 * wheel (one timer for many connections), a stopped reader past the byte bound ended with the
 * protocol's bytes and resumed exactly, and the ReadableStream fallback for app.request.
 */
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { cors } from 'hono/cors';
import { afterEach, describe, expect, it } from 'vitest';
import { sseStats, startSse, type SseStream } from '../../src/http/sse-transport.js';
import { destroyReleased } from '../../src/http/http1-release.js';

const HB = Buffer.from(':hb\n\n');
const frame = (id: number, size = 0): Buffer => Buffer.from(`id: ${id}\ndata: ${'x'.repeat(size)}${id}\n\n`);

let servers: ServerType[] = [];
let sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets) s.destroy();
  sockets = [];
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  servers = [];
});

const listen = (app: Hono): Promise<number> =>
  new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(info.port));
    servers.push(s);
  });

/** A raw HTTP/1.1 client on a TCP socket: `pause()` stops reading for real (the kernel buffers fill). */
const rawGet = (port: number, path: string, headers: Record<string, string> = {}) => {
  const socket = net.connect(port, '127.0.0.1');
  sockets.push(socket);
  let text = '';
  const waiters = new Set<() => void>();
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => {
    text += d;
    for (const w of [...waiters]) w();
  });
  socket.on('close', () => {
    for (const w of [...waiters]) w();
  });
  socket.on('error', () => {});
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${head}\r\n`);
  const until = (pred: () => boolean, what: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (pred()) {
          waiters.delete(check);
          resolve();
        } else if (socket.destroyed) {
          waiters.delete(check);
          reject(new Error(`connection closed before ${what}: ${text.slice(0, 300)}`));
        }
      };
      waiters.add(check);
      check();
    });
  /** The body: read to the close (the transport's framing), or with chunked framing removed. */
  const body = (): string => {
    const start = text.indexOf('\r\n\r\n');
    if (start < 0) return '';
    if (!/^transfer-encoding: chunked$/im.test(text.slice(0, start))) return text.slice(start + 4);
    let i = start + 4;
    let out = '';
    for (;;) {
      const eol = text.indexOf('\r\n', i);
      if (eol < 0) break;
      const size = parseInt(text.slice(i, eol), 16);
      if (!Number.isFinite(size) || size === 0 || eol + 2 + size > text.length) break;
      out += text.slice(eol + 2, eol + 2 + size);
      i = eol + 2 + size + 2;
    }
    return out;
  };
  const headerBlock = (): string => text.slice(0, Math.max(0, text.indexOf('\r\n\r\n'))).toLowerCase();
  return { socket, until, body, headerBlock, ended, raw: () => text };
};

const blocks = (body: string): string[] => body.split('\n\n').slice(0, -1);
const ids = (body: string): number[] =>
  blocks(body)
    .map((b) => /^id: (\d+)$/m.exec(b)?.[1])
    .filter((x): x is string => x !== undefined)
    .map(Number);

/** A producer that never waits: one frame of `size` bytes per turn, ids `from`..`total`, then `done`. */
const produce = (stream: SseStream, from: number, total: number, size: number, done: () => void): void => {
  let id = from;
  const tick = (): void => {
    if (!stream.open) return;
    if (id > total) return done();
    stream.write(frame(id++, size));
    setImmediate(tick);
  };
  tick();
};

/** A raw client of `/s` that read the first frame, then stopped reading for real. */
const pausedAfterFirst = async (port: number) => {
  const client = rawGet(port, '/s');
  await client.until(() => client.body().includes('id: 1\n'), 'the first frame');
  client.socket.pause();
  return client;
};

describe('SSE transport over loopback HTTP', () => {
  it('keeps headers set by middleware (CORS before next, X-Request-Id after) on the SSE head', async () => {
    const app = new Hono();
    app.use('*', cors({ origin: ['https://app.example'], exposeHeaders: ['X-Request-Id'] }));
    app.use('*', async (c, next) => {
      await next();
      c.res.headers.set('X-Request-Id', 'req-42');
    });
    app.get('/s', (c) => {
      const { stream, response } = startSse(c, { headers: { connection: 'keep-alive' } });
      stream.write(frame(1));
      return response;
    });
    const port = await listen(app);
    const client = rawGet(port, '/s', { Origin: 'https://app.example' });
    await client.until(() => client.body().includes('id: 1\n'), 'the first frame');
    const head = client.headerBlock();
    expect(head.startsWith('http/1.1 200')).toBe(true);
    expect(head).toContain('content-type: text/event-stream');
    expect(head).toContain('cache-control: no-cache');
    expect(head).toContain('x-accel-buffering: no');
    expect(head).toContain('access-control-allow-origin: https://app.example');
    expect(head).toContain('access-control-expose-headers: x-request-id');
    expect(head).toContain('vary: origin');
    expect(head).toContain('x-request-id: req-42');
    expect(head).not.toContain('x-hono-already-sent');
    expect(head).not.toContain('content-length');
  });

  it('beats from open on one wheel timer for many connections, frames never resetting it', async () => {
    const app = new Hono();
    const streams: SseStream[] = [];
    app.get('/s', (c) => {
      const { stream, response } = startSse(c, { heartbeat: { bytes: HB, everyMs: 40 } });
      streams.push(stream);
      return response;
    });
    const port = await listen(app);
    const before = sseStats();
    const clients = Array.from({ length: 40 }, () => rawGet(port, '/s'));
    await Promise.all(clients.map((c) => c.until(() => c.body().includes(':hb'), 'a heartbeat')));
    const during = sseStats();
    expect(streams.filter((s) => s.open)).toHaveLength(40);
    expect(during.wheelEntries).toBeGreaterThanOrEqual(40);
    expect(during.wheelTimers).toBe(1);
    // Frames written all the time do not push heartbeats back (spec: not reset by frames).
    const busy = clients[0]!;
    let n = 0;
    const pump = setInterval(() => streams[0]!.write(frame(++n)), 5);
    try {
      const hbs = (): number => blocks(busy.body()).filter((b) => b === ':hb').length;
      const start = hbs();
      await busy.until(() => hbs() >= start + 3, 'three more heartbeats while frames flow');
    } finally {
      clearInterval(pump);
    }
    for (const c of clients) c.socket.destroy();
    await Promise.all(streams.map((s) => s.done));
    expect(sseStats().open).toBeLessThanOrEqual(before.open);
    expect(sseStats().wheelEntries).toBeLessThanOrEqual(before.wheelEntries);
  });

  it('ends a reader that stopped reading past maxQueuedBytes with the protocol bytes; it resumes exactly', async () => {
    const app = new Hono();
    let overflows = 0;
    let current: SseStream | null = null;
    let overflowed!: () => void;
    const overflow = new Promise<void>((resolve) => (overflowed = resolve));
    const total = 2500;
    app.get('/s', (c) => {
      const from = Number(c.req.header('last-event-id') ?? '0') + 1;
      const { stream, response } = startSse(c, {
        maxQueuedBytes: 64 * 1024,
        onOverflow: () => {
          overflows++;
          overflowed();
          return Buffer.from('event: bye\ndata: {}\n\n');
        },
      });
      current = stream;
      produce(stream, from, total, 8192, () => stream.end());
      return response;
    });
    const port = await listen(app);
    const slow = await pausedAfterFirst(port);
    const first = current as unknown as SseStream;
    await overflow;
    expect(first.overflowed).toBe(true);
    expect(first.open).toBe(false);
    expect(overflows).toBe(1);
    slow.socket.resume();
    await slow.ended; // the response ends with its connection
    await first.done;
    const got = ids(slow.body());
    expect(got.length).toBeGreaterThan(0);
    expect(got.length).toBeLessThan(total);
    expect(got).toEqual(got.map((_, i) => i + 1));
    expect(slow.body().endsWith('event: bye\ndata: {}\n\n')).toBe(true);

    const again = rawGet(port, '/s', { 'Last-Event-ID': String(got[got.length - 1]) });
    await again.ended;
    const rest = ids(again.body());
    expect([...got, ...rest]).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });

  it("holds a stalled reader's backlog itself: writes stop until the socket drains, nothing lost", async () => {
    const app = new Hono();
    const total = 20_000; // 1 KiB frames: 20 MB, several times what the kernel takes while paused
    let writes = 0;
    let produced!: () => void;
    const done = new Promise<void>((resolve) => (produced = resolve));
    app.get('/s', (c) => {
      const { stream, response } = startSse(c, { maxQueuedBytes: 64 * 1024 * 1024 });
      // Count what reaches the socket: Node's own buffer used to take one entry per event here.
      const socket = (c.env as { outgoing: { socket: net.Socket } }).outgoing.socket;
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      socket.write = ((...args: unknown[]) => {
        writes++;
        return write(...args);
      }) as typeof socket.write;
      produce(stream, 1, total, 1000, produced);
      return response;
    });
    const slow = await pausedAfterFirst(await listen(app));
    await done;
    // Paused, the kernel took a few MB; after that the stream kept the rest (one write per drain).
    expect(writes).toBeLessThan(total / 2);
    slow.socket.resume();
    await slow.until(() => slow.body().includes(`id: ${total}\n`), 'the last frame');
    expect(ids(slow.body())).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(writes).toBeLessThan(total / 2);
  });

  it("lets go of Node's HTTP state once the head is out; close, a client's FIN and a drain's cut still reach it", async () => {
    type Env = { incoming: { socket: net.Socket }; outgoing: NodeJS.EventEmitter };
    const app = new Hono();
    const opened: { stream: SseStream; socket: net.Socket; resClosed: Promise<void> }[] = [];
    let aborts = 0;
    // Async, as every gateway route is behind its middleware: @hono/node-server hangs its close
    // handler (the request signal's abort) only on a response that is not returned at once.
    app.get('/s', async (c) => {
      await Promise.resolve();
      const env = c.env as Env;
      const socket = env.incoming.socket;
      // The request's signal taken before the stream starts (BeeOS invoke does) still aborts.
      c.req.raw.signal.addEventListener('abort', () => aborts++);
      const resClosed = new Promise<void>((r) => env.outgoing.on('close', () => r()));
      const { stream, response } = startSse(c, { heartbeat: { bytes: HB, everyMs: 20 } });
      stream.write(frame(1));
      opened.push({ stream, socket, resClosed });
      return response;
    });
    const port = await listen(app);
    const server = servers[servers.length - 1]!;

    // A client that leaves (RST or FIN-and-close): the response's close and the stream's end follow.
    const leaving = rawGet(port, '/s');
    await leaving.until(() => leaving.body().includes(':hb'), 'a heartbeat');
    const first = opened[0]!;
    const socket = first.socket as net.Socket & { parser?: unknown; _httpMessage?: unknown };
    // Released: no parser, none of the server's per-connection listeners or wrappers.
    expect(socket.parser).toBeNull();
    expect(socket._httpMessage).toBeNull();
    expect(socket.rawListeners('data').map((f) => f.name)).not.toContain('bound socketOnData');
    expect(socket.rawListeners('close').map((f) => f.name)).not.toContain('bound socketOnClose');
    expect(Object.hasOwn(socket, 'on') ? socket.on : net.Socket.prototype.on).toBe(net.Socket.prototype.on);
    leaving.socket.end();
    await first.resClosed;
    await first.stream.done;
    expect(first.stream.open).toBe(false);
    expect(aborts).toBe(1);

    // Still beating after release, then cut by the server's drain with nothing of Node's to walk.
    const staying = rawGet(port, '/s');
    await staying.until(() => staying.body().split(':hb').length > 3, 'heartbeats after the release');
    const second = opened[1]!;
    (server as unknown as { closeAllConnections(): void }).closeAllConnections();
    destroyReleased(server);
    await staying.ended;
    await second.resClosed;
    await second.stream.done;
    expect(aborts).toBe(2);
  });

  it('serves the same stream as a ReadableStream body without a Node socket (app.request)', async () => {
    const app = new Hono();
    app.get('/s', (c) => {
      const { stream, response } = startSse(c, { headers: { 'x-extra': '1' } });
      stream.writeAll([frame(1), frame(2)]);
      stream.end(Buffer.from(':bye\n\n'));
      return response;
    });
    const res = await app.request('/s');
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('x-extra')).toBe('1');
    expect(await res.text()).toBe('id: 1\ndata: 1\n\nid: 2\ndata: 2\n\n:bye\n\n');
  });
});

describe('keep-alive on a live stream', () => {
  /** The keep-alive timer's remaining ms of the server's end of `client`'s connection, from `ss`. */
  const keepAliveLeftMs = (port: number, client: net.Socket): number => {
    const out = execFileSync(
      'ss',
      ['-tnoH', 'state', 'established', `( sport = :${port} and dport = :${client.localPort} )`],
      {
        encoding: 'utf8',
      },
    );
    const m = /timer:\(keepalive,(?:(\d+)min)?(?:([\d.]+)sec)?(?:([\d.]+)ms)?/.exec(out);
    if (!m) throw new Error(`no keep-alive timer in: ${out}`);
    return Number(m[1] ?? 0) * 60_000 + Number(m[2] ?? 0) * 1000 + Number(m[3] ?? 0);
  };

  it('waits past twice the heartbeat, so a healthy stream is never probed between beats', async () => {
    const app = new Hono();
    app.get('/beating', (c) => startSse(c, { heartbeat: { bytes: HB, everyMs: 10_000 } }).response);
    app.get('/silent', (c) => startSse(c, {}).response);
    const port = await listen(app);
    // As the gateway does for every accepted socket (downstream.keepAliveMs, 1 s by default).
    servers.at(-1)!.on('connection', (socket: net.Socket) => socket.setKeepAlive(true, 1000));
    const beating = rawGet(port, '/beating');
    const silent = rawGet(port, '/silent');
    await beating.until(() => beating.raw().includes('\r\n\r\n'), 'the head');
    await silent.until(() => silent.raw().includes('\r\n\r\n'), 'the head');
    // 20 s from the head (less the moments since); a stream without heartbeats keeps the socket's 1 s.
    expect(keepAliveLeftMs(port, beating.socket)).toBeGreaterThan(15_000);
    expect(keepAliveLeftMs(port, silent.socket)).toBeLessThanOrEqual(1000);
  });
});
