/**
 * A TCP proxy for the long soak that can cut its connections (both sides learn at once) or
 * blackhole them: a network partition, where nobody learns anything. While blackholed it keeps
 * every socket open and forwards nothing in either direction (what was sent waits in the kernel's
 * buffers, as TCP retransmits would keep it), sends no FIN and no RST, and accepts new connections
 * without connecting them onward. The partition then heals: `resume` forwards everything held, in
 * order; `drop` closes every connection it held (a middlebox that forgot them), so both sides see
 * their connection end only then.
 */
import net, { type AddressInfo } from 'node:net';

export type Heal = 'resume' | 'drop';

export interface PartitionProxy {
  /** `host:port` on 127.0.0.1 (no scheme). */
  readonly address: string;
  /** Destroy every connection, both sides (a network cut). */
  cutAll(): void;
  /** Forward nothing for `ms`, then heal; resolves once healed. A cut during it drops everything. */
  blackhole(ms: number, heal: Heal): Promise<void>;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
}

export const startPartitionProxy = async (targetPort: number): Promise<PartitionProxy> => {
  const pairs = new Set<Pair>();
  let holding = false;

  const drop = (pair: Pair): void => {
    pairs.delete(pair);
    pair.client.destroy();
    pair.upstream?.destroy();
  };
  const forward = (pair: Pair): void => {
    if (pair.client.destroyed) return drop(pair);
    if (pair.upstream === null) {
      const upstream = net.connect(targetPort, '127.0.0.1');
      pair.upstream = upstream;
      upstream.on('error', () => drop(pair)).on('close', () => drop(pair));
    }
    pair.client.pipe(pair.upstream);
    pair.upstream.pipe(pair.client);
  };
  const hold = (pair: Pair): void => {
    // Unpiped and paused: nothing is read, so the peers' writes back up in the kernel, unanswered.
    pair.client.unpipe();
    pair.upstream?.unpipe();
    pair.client.pause();
    pair.upstream?.pause();
  };

  const server = net.createServer((client) => {
    const pair: Pair = { client, upstream: null };
    pairs.add(pair);
    client.on('error', () => drop(pair)).on('close', () => drop(pair));
    if (holding) hold(pair);
    else forward(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    address: `127.0.0.1:${port}`,
    cutAll: () => {
      for (const pair of [...pairs]) drop(pair);
    },
    blackhole: async (ms, heal) => {
      holding = true;
      for (const pair of pairs) hold(pair);
      await new Promise((resolve) => setTimeout(resolve, ms));
      holding = false;
      for (const pair of [...pairs]) {
        if (heal === 'drop') drop(pair);
        else forward(pair);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of [...pairs]) drop(pair);
        server.close(() => resolve());
      }),
  };
};
