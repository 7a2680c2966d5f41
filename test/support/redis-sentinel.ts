/**
 * A throwaway Sentinel setup on loopback: one master, one replica (`--replicaof`), one sentinel
 * (`redis-server <conf> --sentinel`) with short down-after and failover timeouts, no persistence.
 * For tests that run the store through Sentinel and fail the master over for real (SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, removeDir, spawnRedisServer, waitForPort } from './redis-server.js';

export const SENTINEL_MASTER_NAME = 'mymaster';

export interface RedisSentinelProcess {
  masterPort: number;
  replicaPort: number;
  sentinelPort: number;
  /** The `redis` config that reaches the master through the sentinel. */
  config: { sentinels: string[]; name: string };
  /** SIGKILL the current master (no clean shutdown, nothing saved). */
  killMaster(): Promise<void>;
  /** Resolves with the master port the sentinel names once it is not `oldPort` (bounded). */
  waitForNewMaster(oldPort: number, timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

/** Poll until `check` holds: there is no event for replication links or sentinel discovery. */
const until = async (what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const kill = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });

export const startRedisSentinel = async (): Promise<RedisSentinelProcess> => {
  const dir = mkdtempSync(join(tmpdir(), 'mg-sentinel-'));
  const [masterPort, replicaPort, sentinelPort] = [await freePort(), await freePort(), await freePort()];
  const server = (port: number, ...extra: string[]): ChildProcess =>
    spawnRedisServer(port, dir, [
      '--dbfilename',
      `dump-${port}.rdb`,
      // Sync a new replica at once (the default waits 5 s for more replicas to share the transfer).
      '--repl-diskless-sync-delay',
      '0',
      ...extra,
    ]);
  const children = new Map<number, ChildProcess>();
  const clients: Redis[] = [];
  const client = (port: number): Redis => {
    const c = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => {});
    clients.push(c);
    return c;
  };
  const stop = async (): Promise<void> => {
    for (const c of clients) c.disconnect();
    await Promise.all([...children.values()].map(kill));
    removeDir(dir);
  };
  let sentinel: Redis;
  try {
    children.set(masterPort, server(masterPort));
    children.set(replicaPort, server(replicaPort, '--replicaof', '127.0.0.1', String(masterPort)));
    await Promise.all([waitForPort(masterPort, 10_000), waitForPort(replicaPort, 10_000)]);
    const replica = client(replicaPort);
    await until(
      'replica in sync',
      async () => /master_link_status:up/.test(await replica.info('replication')),
      10_000,
    );
    // Sentinel rewrites its config file: it must be writable, in the temp dir.
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${sentinelPort}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${masterPort} 1`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 1000`,
        `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 5000`,
        `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
        '',
      ].join('\n'),
    );
    children.set(sentinelPort, spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' }));
    await waitForPort(sentinelPort, 10_000);
    sentinel = client(sentinelPort);
    // A failover needs a replica the sentinel knows and has heard from (it learns it from the
    // master's INFO, then asks the replica itself).
    await until(
      'sentinel knows the replica',
      async () => {
        const replicas = (await sentinel.call('SENTINEL', 'REPLICAS', SENTINEL_MASTER_NAME)) as string[][];
        return replicas.some((r) => {
          const fields = new Map<string, string>();
          for (let i = 0; i + 1 < r.length; i += 2) fields.set(r[i]!, r[i + 1]!);
          return (
            fields.get('port') === String(replicaPort) &&
            !/disconnected|s_down/.test(fields.get('flags') ?? '') &&
            fields.get('master-link-status') === 'ok'
          );
        });
      },
      15_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const masterNamed = async (): Promise<number> => {
    const addr = (await sentinel.call(
      'SENTINEL',
      'GET-MASTER-ADDR-BY-NAME',
      SENTINEL_MASTER_NAME,
    )) as string[];
    return Number(addr[1]);
  };
  return {
    masterPort,
    replicaPort,
    sentinelPort,
    config: { sentinels: [`redis://127.0.0.1:${sentinelPort}`], name: SENTINEL_MASTER_NAME },
    killMaster: async () => {
      const port = await masterNamed();
      const child = children.get(port);
      if (child) await kill(child);
    },
    waitForNewMaster: async (oldPort, timeoutMs) => {
      let port = oldPort;
      await until(
        'sentinel promotes a replica',
        async () => {
          port = await masterNamed();
          return port !== oldPort;
        },
        timeoutMs,
      );
      return port;
    },
    stop,
  };
};
