/**
 * A throwaway 3-master Redis Cluster on loopback (no replicas, no persistence): three
 * `redis-server --cluster-enabled yes` joined by `redis-cli --cluster create`. For tests that run
 * the store on a real Cluster. Never a mock.
 */
import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, removeDir, spawnRedisServer, waitForPort } from './redis-server.js';

const run = promisify(execFile);

/** redis-server and redis-cli are both installed. */
export const redisCliAvailable = (): boolean => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    execFileSync('redis-cli', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

export interface RedisClusterProcess {
  ports: number[];
  /** Seed URLs for `redis: {cluster: [...]}`. */
  urls: string[];
  /** The master (`127.0.0.1:port`) serving a slot, as the cluster itself reports it. */
  ownerOf(slot: number): string;
  /** Keys held by each master, by port. */
  keysPerNode(): Promise<Map<number, number>>;
  stop(): Promise<void>;
}

const spawnNode = (dir: string, port: number): ChildProcess =>
  spawnRedisServer(port, dir, [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    join(dir, `nodes-${port}.conf`),
    '--cluster-node-timeout',
    '2000',
  ]);

/** Poll CLUSTER INFO on every node until each says `cluster_state:ok` (no event exists for it). */
const waitClusterOk = async (clients: Redis[], timeoutMs: number): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const infos = await Promise.all(clients.map((c) => c.cluster('INFO') as Promise<string>));
    if (infos.every((i) => i.includes('cluster_state:ok'))) return;
    if (Date.now() > deadline) throw new Error(`cluster not ok within ${timeoutMs} ms:\n${infos[0]}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

export const startRedisCluster = async (): Promise<RedisClusterProcess> => {
  const dir = mkdtempSync(join(tmpdir(), 'mg-cluster-'));
  const ports = [await freePort(), await freePort(), await freePort()];
  const children = ports.map((p) => spawnNode(dir, p));
  const clients: Redis[] = [];
  const stop = async (): Promise<void> => {
    for (const c of clients) c.disconnect();
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
    removeDir(dir);
  };
  try {
    await Promise.all(ports.map((p) => waitForPort(p, 10_000)));
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { timeout: 20_000 },
    );
    for (const p of ports) clients.push(new Redis(p, '127.0.0.1', { lazyConnect: false }));
    await waitClusterOk(clients, 15_000);
  } catch (err) {
    await stop();
    throw err;
  }
  const slots = await clients[0]!.cluster('SLOTS');
  const ownerOf = (slot: number): string => {
    const range = slots.find(([from, to]) => slot >= from && slot <= to);
    const master = range?.[2];
    if (!master) throw new Error(`slot ${slot} unassigned`);
    return `${master[0]}:${master[1]}`;
  };
  return {
    ports,
    urls: ports.map((p) => `redis://127.0.0.1:${p}`),
    ownerOf,
    keysPerNode: async () =>
      new Map(await Promise.all(clients.map(async (c, i) => [ports[i]!, await c.dbsize()] as const))),
    stop,
  };
};
