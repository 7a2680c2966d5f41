/**
 * The servers the Durable Streams bench (streams.ts) compares, each pinned to the server core: the
 * reference Node server `@durable-streams/server` (its in-memory store, ds-reference-server.mjs)
 * and the gateway as a user runs it (`dist/bin/murmur-gateway`, gateway-build.ts) with general
 * streams on (`durableStreams.writable`), on its embedded store or on its own redis-server (pinned
 * to the same core, its CPU and RSS counted with the gateway's).
 */
import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../support/redis-server.js';
import { SERVER_CORE, spawnPinned, startPinnedRedis, stopProcess, waitForPort } from './fanout-procs.js';
import { gatewayLaunch, REPO } from './gateway-build.js';

export type DsTarget = 'reference' | 'embedded' | 'redis';

export interface DsServer {
  /** Where a stream `name` lives: `${streamsUrl}/${name}`. */
  streamsUrl: string;
  /** Processes whose CPU and RSS count: the server, then its redis-server (if any). */
  pids: number[];
  /** Of `pids`, redis-server's (its share is reported apart). */
  redisPid?: number;
  stop(): Promise<void>;
}

const REFERENCE = fileURLToPath(new URL('./ds-reference-server.mjs', import.meta.url));

/** Where the gateway's stdout goes: BENCH_GATEWAY_STDOUT (see gateway-build.ts), else nowhere. */
const gatewayStdout = (): number | 'ignore' => {
  const file = process.env.BENCH_GATEWAY_STDOUT;
  return file ? openSync(file, 'a') : 'ignore';
};

export const startReference = async (): Promise<DsServer> => {
  const port = await freePort();
  const child = spawnPinned(SERVER_CORE, process.execPath, [REFERENCE, String(port)], {
    cwd: REPO,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const stop = (): Promise<void> => stopProcess(child, 3000);
  try {
    await waitForPort(port, 20_000, 'the reference Durable Streams server');
  } catch (err) {
    await stop();
    throw err;
  }
  return { streamsUrl: `http://127.0.0.1:${port}/v1/stream`, pids: [child.pid!], stop };
};

/**
 * The gateway with writable general streams and no capsules. Bounds raised past the bench's
 * streams; everything else as configured by default. BENCH_GATEWAY_CONFIG (a JSON object) adds to
 * its config, as for the fan-out bench.
 */
export const startDsGateway = async (redis: boolean): Promise<DsServer> => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-ds-gw-'));
  const port = await freePort();
  const redisPort = redis ? await freePort() : 0;
  const redisProc = redis ? await startPinnedRedis(redisPort) : null;
  const config = join(dir, 'gateway.json');
  const extra = JSON.parse(process.env.BENCH_GATEWAY_CONFIG ?? '{}') as Record<string, unknown>;
  const settings = { logLevel: 'warn', durableStreams: { writable: true }, ...extra };
  writeFileSync(config, JSON.stringify(settings));
  const args = ['--config', config, '--host', '127.0.0.1', '--port', String(port)];
  if (redis) args.push('--redis', `redis://127.0.0.1:${redisPort}`);
  const launch = gatewayLaunch();
  const gw = spawnPinned(SERVER_CORE, launch.cmd, args, {
    cwd: REPO,
    stdio: ['ignore', gatewayStdout(), 'inherit'],
    env: { ...process.env, ...launch.env, REDIS_URL: '', NODE_ENV: 'production' },
  });
  const stop = async (): Promise<void> => {
    await stopProcess(gw, 5000);
    if (redisProc) await stopProcess(redisProc);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort(port, 30_000, 'the gateway');
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    streamsUrl: `http://127.0.0.1:${port}/v1/stream`,
    pids: redisProc ? [gw.pid!, redisProc.pid!] : [gw.pid!],
    ...(redisProc ? { redisPid: redisProc.pid! } : {}),
    stop,
  };
};

export const startDsServer = (t: DsTarget): Promise<DsServer> =>
  t === 'reference' ? startReference() : startDsGateway(t === 'redis');
