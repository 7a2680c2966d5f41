/**
 * A hostile HTTP proxy for tests, on 127.0.0.1: it forwards every request to the gateway, cuts every
 * SSE response after `sseCutMs`, cuts any response silent for `idleCutMs`, and never keeps an idle
 * connection (every response closes its socket). Counts what it saw so tests can assert the path.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CuttingProxy {
  url: string;
  stats: { requests: number; sse: number; sseCut: number; longPolls: number };
  close(): Promise<void>;
}

export const startCuttingProxy = async (
  target: string,
  opts: { sseCutMs: number; idleCutMs: number },
): Promise<CuttingProxy> => {
  const upstream = new URL(target);
  const stats = { requests: 0, sse: 0, sseCut: 0, longPolls: 0 };
  const server = http.createServer((req, res) => {
    stats.requests++;
    if ((req.url ?? '').includes('live=long-poll')) stats.longPolls++;
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        // Host is kept, as reverse proxies do, so the gateway's absolute URLs point at the proxy.
        headers: { ...req.headers, connection: 'close' },
        agent: false,
      },
      (up) => {
        const headers = { ...up.headers, connection: 'close' };
        res.writeHead(up.statusCode ?? 502, headers);
        const cut = () => {
          up.destroy();
          res.destroy();
        };
        let idle = setTimeout(cut, opts.idleCutMs);
        let sseTimer: NodeJS.Timeout | undefined;
        if (String(up.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          stats.sse++;
          sseTimer = setTimeout(() => {
            stats.sseCut++;
            cut();
          }, opts.sseCutMs);
        }
        up.on('data', (chunk: Buffer) => {
          clearTimeout(idle);
          idle = setTimeout(cut, opts.idleCutMs);
          res.write(chunk);
        });
        up.on('end', () => res.end());
        const done = () => {
          clearTimeout(idle);
          if (sseTimer) clearTimeout(sseTimer);
        };
        up.on('close', done);
        res.on('close', () => {
          done();
          up.destroy();
        });
      },
    );
    forward.on('error', () => res.destroy());
    // The client went away (or we cut it): drop the upstream request too.
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};
