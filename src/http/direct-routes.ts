/**
 * Routes served straight from Node's request, before Hono: a surface's hottest requests (a Durable
 * Streams append) skip the router, the middleware chain and the web Request/Response around them
 * (half of an append's CPU on the embedded store, docs/benchmarks.md), and still meet every rule
 * that chain applies, by the same code:
 *
 * - the body deadline (armBodyTimeout), the caller (the authenticator, the same client address), the
 *   abuse bounds (admissionShape, AbuseLimits, the surface's 429), a 503's Retry-After, a refusal
 *   before the body arrived closing the connection (refusal-connection.ts), the app's 500/503 for a
 *   fault before the route;
 * - the rest of the chain provably never applies to what is taken here: CORS (no direct route when
 *   origins are configured), the malformed-path guard (no `%` in the target), tickets (no query:
 *   `?ticket=` cannot be there), connection accounting and traces (not on a surface's capsule
 *   paths, which are never taken).
 *
 * Only a plain target is taken: HTTP/1.x, a path of RFC 3986 characters with no escape, no query,
 * no fragment, no backslash and no dot segment, a Host node-server takes as it is, a body with a
 * Content-Length. For such a target the path Hono would route is the target itself
 * (@hono/node-server builds the URL from it unchanged), so the route sees what its Hono twin sees.
 * Anything else goes through Hono as before.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Authenticator } from '../auth/authenticator.js';
import type { RequestOrigin } from '../auth/client-ip.js';
import type { AbuseLimits } from '../auth/limits.js';
import { openPrincipal, type Principal } from '../auth/principal.js';
import { admissionShape, armBodyTimeout } from './limits-middleware.js';
import type { RequestListener } from './request-pacing.js';
import {
  surfaceAt,
  type DirectAnswer,
  type DirectRoute,
  type HeaderReader,
  type Surface,
} from './surface.js';

/**
 * Headers Node keeps once (the first of duplicates) and @hono/node-server therefore reads from the
 * raw list, joined: the same list as node-server's, so a duplicate reads the same here.
 */
const NON_JOINED = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

const isHttpWhitespace = (code: number): boolean => code === 9 || code === 10 || code === 13 || code === 32;
const trimHttp = (value: string): string => {
  let start = 0;
  let end = value.length;
  while (start < end && isHttpWhitespace(value.charCodeAt(start))) start++;
  while (end > start && isHttpWhitespace(value.charCodeAt(end - 1))) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
};

/** `c.req.header(name)` of @hono/node-server on an HTTP/1 request, read from Node's request. */
export const headerReader =
  (req: IncomingMessage): HeaderReader =>
  (name) => {
    if (!NON_JOINED.has(name)) {
      if (name === 'set-cookie' || name === '__proto__') return undefined;
      const value = req.headers[name];
      return typeof value === 'string' ? trimHttp(value) : undefined;
    }
    const raw = req.rawHeaders;
    let value: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const n = raw[i]!;
      if (n.length === name.length && n.toLowerCase() === name) {
        const v = trimHttp(raw[i + 1]!);
        value = value === undefined ? v : `${value}, ${v}`;
      }
    }
    return value;
  };

/**
 * A target @hono/node-server keeps as it is and Hono routes as it is: `/`, then unreserved and
 * sub-delimiter characters, `:`, `@` and `/` only (no `%`, `?`, `#` or `\`).
 */
const PLAIN_TARGET = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*$/;
/** `/./`, `/../` or a trailing `/.` or `/..`: the URL parser would resolve it. */
const DOT_SEGMENT = /\/\.\.?(?:\/|$)/;
/** The Host node-server builds its URL from without a URL parse (its own check). */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;

const readBody = (req: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
    });
    req.once('end', () => resolve(Buffer.concat(chunks, length)));
    req.once('error', reject);
    // The client went away before the body was whole: no answer is owed.
    req.once('close', () => {
      if (!req.complete) reject(new Error('request closed before its body arrived'));
    });
  });

export interface DirectDispatchOptions {
  surfaces: readonly Surface[];
  /** Absent: every caller is open (as the app without its auth middleware). */
  auth?: { authenticator: Authenticator; originIp: (o: RequestOrigin) => string };
  limits?: AbuseLimits;
  bodyTimeoutMs?: number;
  /** The app's answer to a fault before the route (its onError), e.g. the store out of reach. */
  appFailed(err: unknown, path: string): DirectAnswer;
}

export interface DirectListener extends RequestListener {
  /** Requests a direct route took so far. */
  readonly served: number;
}

/**
 * `listener` behind the surfaces' direct routes: a request one of them takes is served here, every
 * other goes to `listener` (Hono's) untouched.
 */
export const directRoutesFirst = (
  options: DirectDispatchOptions,
  listener: RequestListener,
): DirectListener => {
  const { surfaces } = options;
  // Every other request passes with one prefix compare per direct surface.
  const prefixes = surfaces.filter((s) => s.direct).map((s) => s.prefix);
  let served = 0;
  const { auth, limits, bodyTimeoutMs } = options;
  const limited = limits?.enabled ? limits : null;

  const write = (req: IncomingMessage, res: ServerResponse, answer: DirectAnswer): void => {
    // The body deadline answered (408) or the client is gone: nothing more goes out.
    if (res.headersSent || res.destroyed) return;
    let headers = answer.headers;
    const refusedUnread = answer.status >= 400 && !req.complete;
    const retryAfter = answer.status === 503 && headers['retry-after'] === undefined;
    if (refusedUnread || retryAfter || answer.body !== null) {
      headers = { ...headers };
      // The same as refusal-connection.ts and the app's 503 rule.
      if (refusedUnread) headers.connection = 'close';
      if (retryAfter) headers['retry-after'] = '1';
      if (answer.body !== null) headers['content-length'] = String(Buffer.byteLength(answer.body));
    }
    res.writeHead(answer.status, headers);
    if (answer.body === null) res.end();
    else res.end(answer.body);
  };

  const serve = async (
    route: DirectRoute,
    surface: Surface,
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    path: string,
    header: HeaderReader,
  ): Promise<void> => {
    // Armed once Node's parser has returned from this packet (microtasks run after it): a body that
    // came with its headers, as most do, is complete by then and needs no deadline (armBodyTimeout).
    if (bodyTimeoutMs) queueMicrotask(() => armBodyTimeout(req, res, bodyTimeoutMs));
    let principal: Principal;
    try {
      principal = auth
        ? await auth.authenticator.resolve({
            authorization: header('authorization'),
            ticket: undefined,
            ip: auth.originIp({ peer: req.socket.remoteAddress, forwardedFor: header('x-forwarded-for') }),
          })
        : openPrincipal('unknown');
      if (limited) {
        const shape = admissionShape(method, path, surface);
        if (shape) {
          const admission = await limited.admit(principal, shape);
          if (!admission.ok) return write(req, res, route.rateLimited(admission.retryAfterSeconds));
          res.on('close', admission.release);
        }
      }
    } catch (err) {
      return write(req, res, options.appFailed(err, path));
    }
    let answer: DirectAnswer;
    try {
      answer = await route.serve({ req, method, path, principal, header, body: () => readBody(req) });
    } catch (err) {
      if (res.destroyed) return;
      answer = route.failed(err, path);
    }
    write(req, res, answer);
  };

  const direct = ((req: IncomingMessage, res: ServerResponse): void => {
    const url = req.url ?? '';
    const method = req.method ?? '';
    if (
      prefixes.some((prefix) => url.startsWith(prefix)) &&
      req.httpVersionMajor === 1 &&
      PLAIN_TARGET.test(url) &&
      !DOT_SEGMENT.test(url)
    ) {
      const surface = surfaceAt(surfaces, url);
      if (surface?.direct && !surface.capsulePath?.test(url)) {
        const header = headerReader(req);
        const host = req.headers.host;
        if (host !== undefined && PLAIN_HOST.test(host) && surface.direct.takes(method, url, header)) {
          served++;
          // Every fault is answered inside; should writing the answer itself fail, the connection
          // goes rather than leave its client waiting.
          serve(surface.direct, surface, req, res, method, url, header).catch(() => res.destroy());
          return;
        }
      }
    }
    listener(req, res);
  }) as DirectListener;
  Object.defineProperty(direct, 'served', { get: () => served });
  return direct;
};
