/**
 * Process plumbing for the scale benches (scale-*.ts): the gateway as a user runs it
 * (`dist/bin/murmur-gateway --config …`, built first: gateway-build.ts) with any capsule list and
 * store, pinned to the server core like the fan-out bench's (fanout-servers.ts), and a pinned
 * redis-server. The fd limit of the gateway is raised to the hard limit: 10,000 connections need
 * more than the usual 1,024. BENCH_GW_LOG=<pino level> lets the gateway's log through (it is
 * dropped otherwise): why followers ended, a store that went unreachable.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../support/redis-server.js';
import { SERVER_CORE, spawnPinned, startPinnedRedis, stopProcess, waitForPort } from './fanout-procs.js';
import { gatewayLaunch } from './gateway-build.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

export interface BenchRedis {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export const startBenchRedis = async (): Promise<BenchRedis> => {
  const port = await freePort();
  const child = await startPinnedRedis(port);
  return { url: `redis://127.0.0.1:${port}`, pid: child.pid!, stop: () => stopProcess(child) };
};

export interface BenchGateway {
  baseUrl: string;
  /** The gateway's own process (not redis-server): its RSS is the figure. */
  pid: number;
  stop(): Promise<void>;
}

/**
 * `bash -c 'ulimit -n <hard> && exec dist/bin/murmur-gateway …'` under taskset: exec (there and in the
 * launcher) keeps the pid the node process's own.
 * `config` is written as the gateway's JSON config file (capsules, downstream, store, …).
 */
export const startBenchGateway = async (
  config: Record<string, unknown>,
  redisUrl: string | null,
  /** More node flags for this gateway (after BENCH_GATEWAY_NODE_ARGS), e.g. a preload. */
  nodeArgs = '',
): Promise<BenchGateway> => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-scale-gw-'));
  const port = await freePort();
  const file = join(dir, 'gateway.json');
  writeFileSync(file, JSON.stringify({ logLevel: process.env.BENCH_GW_LOG ?? 'warn', ...config }));
  const launch = gatewayLaunch();
  const cmd = [
    'ulimit -n $(ulimit -Hn) &&',
    'exec',
    JSON.stringify(launch.cmd),
    '--config',
    JSON.stringify(file),
    '--host 127.0.0.1 --port',
    String(port),
    redisUrl ? `--redis ${redisUrl}` : '',
  ].join(' ');
  const gw = spawnPinned(SERVER_CORE, 'bash', ['-c', cmd], {
    cwd: REPO,
    stdio: ['ignore', process.env.BENCH_GW_LOG ? 'inherit' : 'ignore', 'inherit'],
    env: {
      ...process.env,
      ...launch.env,
      GATEWAY_NODE_FLAGS: `${launch.env.GATEWAY_NODE_FLAGS} ${nodeArgs}`.trim(),
      REDIS_URL: '',
      NODE_ENV: 'production',
    },
  });
  const stop = async (): Promise<void> => {
    await stopProcess(gw, 5000);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort(port, 60_000, 'the gateway');
  } catch (err) {
    await stop();
    throw err;
  }
  return { baseUrl: `http://127.0.0.1:${port}`, pid: gw.pid!, stop };
};

/** Wait until `check` holds (bounded): the benches poll public state from outside the gateway. */
export const until = async (
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

export const median = (xs: number[]): number => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

export const MB = 1024 * 1024;

/**
 * A bench child (TypeScript through tsx) with an IPC channel, pinned to `core`, its fd limit raised
 * to the hard limit first (thousands of sockets each). `exec` keeps the IPC fd and the pid.
 */
export const forkRaised = (core: number, file: string): ChildProcess =>
  spawnPinned(
    core,
    'bash',
    [
      '-c',
      `ulimit -n $(ulimit -Hn) && exec ${JSON.stringify(process.execPath)} --import tsx ${JSON.stringify(file)}`,
    ],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
