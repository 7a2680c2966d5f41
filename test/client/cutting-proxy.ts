/**
 * A TCP proxy on 127.0.0.1 in front of the gateway that kills connections the way real middleboxes
 * do: every connection after a fixed lifetime, or any connection idle (no byte either way) too long.
 */
import net, { type AddressInfo } from 'node:net';

export interface CuttingProxy {
  url: string;
  /** Connections killed so far. */
  readonly kills: number;
  /** The most client connections open at once so far. */
  readonly maxOpen: number;
  close(): Promise<void>;
}

export interface CutRule {
  /** Kill every connection this long after it was accepted. */
  lifetimeMs?: number;
  /** Kill a connection after this long without a byte in either direction. */
  idleMs?: number;
}

export const startCuttingProxy = async (targetUrl: string, rule: CutRule): Promise<CuttingProxy> => {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  let kills = 0;
  let open = 0;
  let maxOpen = 0;
  const server = net.createServer((client) => {
    maxOpen = Math.max(maxOpen, ++open);
    client.once('close', () => open--);
    const upstream = net.connect(Number(target.port), target.hostname);
    let dead = false;
    const kill = (counted: boolean): void => {
      if (dead) return;
      dead = true;
      if (counted) kills++;
      clearTimeout(lifetime);
      clearTimeout(idle);
      client.destroy();
      upstream.destroy();
    };
    const lifetime = rule.lifetimeMs ? setTimeout(() => kill(true), rule.lifetimeMs) : undefined;
    let idle: NodeJS.Timeout | undefined;
    const touch = (): void => {
      if (!rule.idleMs) return;
      clearTimeout(idle);
      idle = setTimeout(() => kill(true), rule.idleMs);
    };
    touch();
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => {
        sockets.delete(s);
        kill(false);
      });
      s.on('error', () => kill(false));
      s.on('data', touch);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get kills() {
      return kills;
    },
    get maxOpen() {
      return maxOpen;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};
