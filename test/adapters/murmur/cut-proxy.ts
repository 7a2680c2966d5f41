/** A tiny TCP proxy for resume tests: forwards to the gateway and can cut every connection at once. */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { scaled } from '../../support/deadlines.js';

export interface CutProxy {
  url: string;
  /** Destroy every open connection, both sides (a network cut). */
  cutAll(): number;
  /** Resolve once at least `n` connections are open (woken by each new connection, not polled). */
  waitForConnections(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const startCutProxy = async (targetPort: number): Promise<CutProxy> => {
  const pairs = new Set<[net.Socket, net.Socket]>();
  let onConnection: (() => void) | null = null;
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
    onConnection?.();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    cutAll: () => {
      const n = pairs.size;
      for (const [a, b] of [...pairs]) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
      return n;
    },
    waitForConnections: (n, timeoutMs = 10_000) =>
      new Promise<void>((resolve, reject) => {
        if (pairs.size >= n) return resolve();
        timeoutMs = scaled(timeoutMs);
        const timer = setTimeout(() => {
          onConnection = null;
          reject(new Error(`only ${pairs.size} of ${n} connections open after ${timeoutMs} ms`));
        }, timeoutMs);
        onConnection = () => {
          if (pairs.size < n) return;
          clearTimeout(timer);
          onConnection = null;
          resolve();
        };
      }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const [a, b] of pairs) {
          a.destroy();
          b.destroy();
        }
        server.close(() => resolve());
      }),
  };
};
