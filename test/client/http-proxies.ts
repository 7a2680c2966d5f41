/**
 * HTTP proxies on 127.0.0.1 in front of the gateway that misbehave the way real ones do, and log
 * every request with timestamps taken by the proxy itself:
 * - `buffer`: hold the whole response (headers included) until the gateway ends it, for the requests
 *   the rule picks: a `text/event-stream` then never shows a byte, a long-poll arrives whole;
 * - `reject`: answer the picked requests itself with 503 and `Retry-After`.
 * `retarget` points it at another gateway (a restarted one on another port) for new requests.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxiedRequest {
  /** 1-based, in arrival order. */
  n: number;
  method: string;
  path: string;
  /** The status the client got (null until the response head was written). */
  status: number | null;
  arrivedAt: number;
  /** When the proxy answered it with a 503 (rejected requests only). */
  rejectedAt: number | null;
  buffered: boolean;
}

export interface ProxyRules {
  /** Hold this request's response until the gateway ends it. */
  buffer?(req: ProxiedRequest, log: readonly ProxiedRequest[]): boolean;
  /** Answer 503 with this `Retry-After` value (seconds) instead of forwarding; null to forward. */
  reject?(req: ProxiedRequest, log: readonly ProxiedRequest[]): string | null;
}

export interface HttpProxy {
  url: string;
  readonly log: readonly ProxiedRequest[];
  /** Forward new requests to another gateway from now on. */
  retarget(url: string): void;
  close(): Promise<void>;
}

export const startHttpProxy = async (targetUrl: string, rules: ProxyRules): Promise<HttpProxy> => {
  let target = new URL(targetUrl);
  const log: ProxiedRequest[] = [];
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const entry: ProxiedRequest = {
      n: log.length + 1,
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      status: null,
      arrivedAt: Date.now(),
      rejectedAt: null,
      buffered: false,
    };
    log.push(entry);
    const retryAfter = rules.reject?.(entry, log) ?? null;
    if (retryAfter !== null) {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': retryAfter });
      entry.status = 503;
      res.end('{"error":{"code":"store_unavailable","message":"injected by the test proxy"}}');
      entry.rejectedAt = Date.now();
      return;
    }
    entry.buffered = rules.buffer?.(entry, log) ?? false;
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: entry.path,
        method: req.method,
        headers: req.headers,
        agent,
      },
      (up) => {
        entry.status = up.statusCode ?? 502;
        if (!entry.buffered) {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        up.on('data', (c: Buffer) => chunks.push(c));
        up.on('end', () => {
          const body = Buffer.concat(chunks);
          const headers = { ...up.headers, 'content-length': String(body.length) };
          delete headers['transfer-encoding'];
          res.writeHead(up.statusCode ?? 502, headers);
          res.end(body);
        });
      },
    );
    upstream.on('error', () => res.destroy());
    // The client went away: so does the request to the gateway (a stream would otherwise live on).
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    log,
    retarget: (url) => {
      target = new URL(url);
    },
    close: async () => {
      server.closeAllConnections();
      agent.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};
