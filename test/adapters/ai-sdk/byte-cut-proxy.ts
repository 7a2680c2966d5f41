/**
 * A TCP proxy on 127.0.0.1 that kills connections mid-response, the way a dropped mobile link or a
 * restarted load balancer does: the n-th connection is destroyed once `budgets[n]` bytes of its
 * answer went through (headers included); connections past the list are left alone.
 */
import net, { type AddressInfo } from 'node:net';

export interface ByteCutProxy {
  url: string;
  /** Connections killed so far. */
  readonly cuts: number;
  close(): Promise<void>;
}

export const startByteCutProxy = async (targetUrl: string, budgets: number[]): Promise<ByteCutProxy> => {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let cuts = 0;
  const server = net.createServer((client) => {
    const budget = budgets[accepted++] ?? Infinity;
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    let sent = 0;
    client.on('data', (d: Buffer) => upstream.write(d));
    upstream.on('data', (d: Buffer) => {
      if (sent + d.length < budget) {
        sent += d.length;
        client.write(d);
        return;
      }
      client.write(d.subarray(0, Math.max(0, budget - sent)));
      cuts++;
      client.destroy();
      upstream.destroy();
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get cuts() {
      return cuts;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};
