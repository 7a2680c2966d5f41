/**
 * A TCP proxy that can HOLD what clients send (buffered, not forwarded) and deliver it later, in
 * order: a replica's commands stuck in the network, reaching Redis after its lease was taken over.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface HoldProxy {
  url: string;
  /** Stop forwarding client → server bytes (they are kept); replies still flow. */
  hold(): void;
  /** Forward everything held, in order, then pass traffic through again. */
  release(): void;
  close(): Promise<void>;
}

export const startHoldProxy = async (targetPort: number): Promise<HoldProxy> => {
  let holding = false;
  const held: [net.Socket, Buffer][] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (d: Buffer) => (holding ? held.push([upstream, d]) : upstream.write(d)));
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hold: () => {
      holding = true;
    },
    release: () => {
      for (const [up, d] of held.splice(0)) if (!up.destroyed) up.write(d);
      holding = false;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};
