/**
 * The listening server, by what the config asks: HTTP/1.1 (the default); HTTPS with HTTP/2 (ALPN
 * `h2`) and HTTP/1.1 on the same port (`tls`); or cleartext HTTP/2 (h2c, prior knowledge, for a
 * proxy in front) beside HTTP/1.1 on the same port (`http2.cleartext`), told apart by the HTTP/2
 * connection preface. One request listener serves them all: @hono/node-server takes HTTP/2
 * requests as they are.
 *
 * HTTP/2 is why a browser page can hold more than six streams to one origin: over HTTP/1.1 every
 * EventSource is a connection of the six a browser allows per origin; over HTTP/2 each is a stream
 * of one connection (100 by default, `maxConcurrentStreams` below).
 *
 * A drain stops accepting, then sends every HTTP/2 session a GOAWAY (its open streams end with their
 * protocol's own signal as on HTTP/1.1, and the session closes once they have), and past the grace
 * period cuts whatever is left.
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttp1Server, type Server as Http1Server, type ServerOptions } from 'node:http';
import {
  createSecureServer,
  createServer as createH2cServer,
  type Http2Session,
  type Http2SecureServer,
  type Http2Server,
} from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import type { RequestListener } from './request-pacing.js';
import { destroyReleased } from './http1-release.js';

export interface HttpServerOptions {
  /** PEM files: HTTPS with HTTP/2 and HTTP/1.1. */
  tls: { cert: string; key: string } | null;
  /** Cleartext HTTP/2 (h2c) beside HTTP/1.1. */
  cleartextHttp2: boolean;
  /** Node's HTTP/1.1 timeouts (headers, whole request, check interval). */
  http1: Pick<ServerOptions, 'requestTimeout' | 'headersTimeout' | 'connectionsCheckingInterval'>;
}

export interface HttpServer {
  /** What `listen` and `address` are called on. */
  readonly server: NetServer;
  /** `http/1.1`, `h2+http/1.1` (TLS, ALPN) or `h2c+http/1.1`. */
  readonly protocols: string;
  readonly scheme: 'http' | 'https';
  /** Stop accepting; resolves once every connection is gone. */
  close(): Promise<void>;
  /** Connections with nothing in flight close now; HTTP/2 sessions get a GOAWAY. */
  closeIdle(): void;
  /** Every connection and session, now. */
  closeAll(): void;
}

/** Streams one HTTP/2 connection may carry at once: a page following many streams is one connection. */
const MAX_CONCURRENT_STREAMS = 256;
/** The client connection preface of HTTP/2 (RFC 9113 §3.4). */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Sessions of an HTTP/2 server, for the drain's GOAWAY and its final cut. */
const trackSessions = (server: Http2Server | Http2SecureServer): Set<Http2Session> => {
  const sessions = new Set<Http2Session>();
  server.on('session', (session: Http2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  return sessions;
};

/**
 * The socket as a stream that first yields the bytes already read from it. An HTTP/2 session reads
 * a net.Socket's handle directly, past anything unshifted into its JS buffer, so the sniffed preface
 * would be lost; a plain Duplex is read through JS (h2c is for a proxy in front: a few connections).
 * The peer's address stays readable for client-IP rules.
 */
const replaying = (socket: Socket, head: Buffer): Duplex => {
  const stream = new Duplex({
    read: () => socket.resume(),
    write: (chunk: Buffer, _encoding, done) => socket.write(chunk, done),
    final: (done) => socket.end(done),
    destroy: (err, done) => {
      socket.destroy(err ?? undefined);
      done(err);
    },
  });
  Object.assign(stream, { remoteAddress: socket.remoteAddress, remotePort: socket.remotePort });
  stream.push(head);
  socket.on('data', (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.once('end', () => stream.push(null));
  socket.once('error', (err) => stream.destroy(err));
  socket.once('close', () => stream.destroy());
  return stream;
};

const closeNet = (server: NetServer): Promise<void> =>
  new Promise((resolve) => server.close(() => resolve()));

export const createHttpServer = (options: HttpServerOptions, listener: RequestListener): HttpServer => {
  const h1Listener = listener as unknown as Parameters<typeof createHttp1Server>[1];
  const settings = { maxConcurrentStreams: MAX_CONCURRENT_STREAMS };

  if (options.tls) {
    const h2 = createSecureServer(
      {
        cert: readFileSync(options.tls.cert),
        key: readFileSync(options.tls.key),
        allowHTTP1: true,
        settings,
      },
      listener as never,
    );
    const sessions = trackSessions(h2);
    // HTTP/1.1 over TLS: connections are tracked for the drain like the sessions are.
    const h1Sockets = new Set<Socket>();
    h2.on('secureConnection', (socket: Socket) => {
      if ((socket as Socket & { alpnProtocol?: string }).alpnProtocol === 'h2') return;
      h1Sockets.add(socket);
      socket.once('close', () => h1Sockets.delete(socket));
    });
    return {
      server: h2,
      protocols: 'h2+http/1.1',
      scheme: 'https',
      close: () => closeNet(h2),
      closeIdle: () => {
        for (const s of sessions) s.close();
      },
      closeAll: () => {
        for (const s of sessions) s.destroy();
        for (const s of h1Sockets) s.destroy();
      },
    };
  }

  const h1: Http1Server = createHttp1Server(options.http1, h1Listener);
  if (!options.cleartextHttp2) {
    return {
      server: h1,
      protocols: 'http/1.1',
      scheme: 'http',
      close: () => closeNet(h1),
      closeIdle: () => h1.closeIdleConnections(),
      closeAll: () => {
        h1.closeAllConnections();
        destroyReleased(h1);
      },
    };
  }

  // h2c and HTTP/1.1 on one port: the first bytes of a connection say which it is.
  const h2c = createH2cServer({ settings }, listener as never);
  const sessions = trackSessions(h2c);
  const front = createNetServer({ pauseOnConnect: false }, (socket) => {
    const seen: Buffer[] = [];
    let length = 0;
    // Until a server takes the socket, its errors (a reset before the first byte) are ours.
    const onError = (): void => {
      socket.destroy();
    };
    socket.on('error', onError);
    const onData = (chunk: Buffer): void => {
      seen.push(chunk);
      length += chunk.length;
      const head = Buffer.concat(seen, length);
      const compared = Math.min(head.length, H2_PREFACE.length);
      const isH2 = head.subarray(0, compared).equals(H2_PREFACE.subarray(0, compared));
      // Undecided until the preface is complete or a byte differs.
      if (isH2 && compared < H2_PREFACE.length) return;
      socket.off('data', onData);
      socket.off('error', onError);
      if (isH2) {
        h2c.emit('connection', replaying(socket, head));
        return;
      }
      socket.pause();
      socket.unshift(head);
      h1.emit('connection', socket);
      socket.resume();
    };
    socket.on('data', onData);
  });
  return {
    server: front,
    protocols: 'h2c+http/1.1',
    scheme: 'http',
    close: async () => {
      await closeNet(front);
    },
    closeIdle: () => {
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
    },
    closeAll: () => {
      h1.closeAllConnections();
      destroyReleased(h1);
      for (const s of sessions) s.destroy();
    },
  };
};
