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
  /**
   * The same, held where the capsule's answer first carries `marker` (a task id, say): everything
   * before it is forwarded, nothing from it on for `ms`.
   */
  stallNextAt(marker: string, ms: number): Promise<void>;
  /** Destroy every open connection, both sides. */
  cutAll(): void;
  close(): Promise<void>;
}

interface Stall {
  afterBytes: number;
  marker?: string;
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
    let seen = '';
    upstream.on('data', (chunk: Buffer) => {
      if (stall?.marker !== undefined && stall.afterBytes < 0) {
        // Bytes as latin1: one character per byte, so an index is a byte offset.
        const text = seen + chunk.toString('latin1');
        const at = text.indexOf(stall.marker);
        if (at >= 0) stall.afterBytes = forwarded + Math.max(0, at - seen.length);
        else seen = text.slice(-stall.marker.length);
      }
      if (
        stall &&
        stall.afterBytes >= 0 &&
        forwarded <= stall.afterBytes &&
        forwarded + chunk.length > stall.afterBytes
      ) {
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
    stallNextAt: (marker, ms) =>
      new Promise<void>((released) => {
        armed = { afterBytes: -1, marker, ms, released };
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
