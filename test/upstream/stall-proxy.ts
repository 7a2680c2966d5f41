/**
 * A TCP proxy between the ingestor and a capsule that can hold the capsule→ingestor direction for a
 * while, partway through a connection (a loaded link, a buffering middlebox), and cut connections.
 */
import net, { type AddressInfo } from 'node:net';

export interface StallProxy {
  url: string;
  /**
   * The next connection forwards `afterBytes` bytes of the capsule's answer, then nothing for `ms`,
   * then the rest. The promise resolves once the held bytes have been released.
   */
  stallNext(afterBytes: number, ms: number): Promise<void>;
  /** Destroy every open connection, both sides. */
  cutAll(): void;
  close(): Promise<void>;
}

interface Stall {
  afterBytes: number;
  ms: number;
  released: () => void;
}

export const startStallProxy = async (targetUrl: string): Promise<StallProxy> => {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  let armed: Stall | null = null;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    const stall = armed;
    armed = null;
    let forwarded = 0;
    upstream.on('data', (chunk: Buffer) => {
      if (stall && forwarded <= stall.afterBytes && forwarded + chunk.length > stall.afterBytes) {
        const head = stall.afterBytes - forwarded;
        forwarded += chunk.length;
        client.write(chunk.subarray(0, head));
        upstream.pause(); // everything after waits in the kernel and here, in order
        setTimeout(() => {
          if (!client.destroyed) client.write(chunk.subarray(head));
          upstream.resume();
          stall.released();
        }, stall.ms);
        return;
      }
      forwarded += chunk.length;
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    stallNext: (afterBytes, ms) =>
      new Promise<void>((released) => {
        armed = { afterBytes, ms, released };
      }),
    cutAll: () => {
      for (const s of [...sockets]) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of [...sockets]) s.destroy();
        server.close(() => resolve());
      }),
  };
};
