/**
 * The two servers the fan-out bench compares, each pinned to the server core with its own
 * redis-server: nginx + nchan (the anchor: pub/sub location backed by Redis, EventSource
 * subscribers) and the gateway as a user runs it (`dist/bin/murmur-gateway`, built first:
 * gateway-build.ts; embedded or Redis store) watching a simulated capsule. Nothing is installed:
 * nginx/nchan are used when present.
 *
 * Options for the follow and 2-worker benches (fanout-follow.ts, fanout-workers.ts): several
 * capsules, nchan's multiplexed subscriber (`/sub/f0,f1,…`, one channel per `/pub/{channel}`),
 * `--workers N` / `worker_processes N`, and the cores the server and its redis-server may use.
 */
import { spawnSync } from 'node:child_process';
import { openSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../support/redis-server.js';
import { SERVER_CORE, spawnPinned, startPinnedRedis, stopProcess, waitForPort } from './fanout-procs.js';
import { gatewayLaunch } from './gateway-build.js';

export const NCHAN_MODULE = '/usr/lib/nginx/modules/ngx_nchan_module.so';

/**
 * The servers' temp dirs (configs, nginx's logs) not removed yet: a bench that exits mid-run (Ctrl-C,
 * a kill) removes them once fanout-procs.ts's exit hook, registered before this one, has stopped the
 * servers.
 */
const dirs = new Set<string>();
process.once('exit', () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.add(dir);
  return dir;
};
const removeDir = (dir: string): void => {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
};
const REPO = fileURLToPath(new URL('../../', import.meta.url));

export interface Server {
  /** Where subscribers GET the SSE stream. */
  subUrl: string;
  /** Where the nchan publisher POSTs (anchor only). */
  pubUrl?: string;
  /** The gateway's origin (gateway only): the surfaces' routes hang off it. */
  baseUrl?: string;
  /** Server processes whose CPU and RSS count: nginx or the gateway, then redis-server (if any). */
  pids: number[];
  stop(): Promise<void>;
}

/** nginx with the nchan module, or why not. */
export const nchanMissing = (): string | null => {
  if (spawnSync('nginx', ['-v'], { stdio: 'ignore' }).status !== 0) return 'nginx is not installed';
  if (!existsSync(NCHAN_MODULE)) return `the nchan module is not installed (${NCHAN_MODULE})`;
  return null;
};

export interface ServerOptions {
  /** Worker processes: nginx's `worker_processes`, the gateway's `--workers` (default 1). */
  workers?: number;
  /** Where the server and its redis-server run: a core or a taskset list (default SERVER_CORE). */
  cores?: number | string;
}

const nginxConf = (dir: string, port: number, redisPort: number, workers: number): string => `
load_module ${NCHAN_MODULE};
daemon off;
worker_processes ${workers};
worker_rlimit_nofile 20000;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream bench_redis { nchan_redis_server redis://127.0.0.1:${redisPort}; }
  server {
    # Several workers: one listening socket each (SO_REUSEPORT), so the kernel spreads connections
    # over them; without it one worker took ~90 % of them in a trial of 200 subscribers.
    listen 127.0.0.1:${port}${workers > 1 ? ' reuseport' : ''};
    location = /pub {
      nchan_publisher;
      nchan_channel_id bench;
      nchan_redis_pass bench_redis;
      nchan_message_buffer_length 1000;
      nchan_message_timeout 60s;
    }
    location = /sub {
      nchan_subscriber eventsource;
      nchan_channel_id bench;
      nchan_redis_pass bench_redis;
    }
    location ~ ^/pub/([a-z0-9]+)$ {
      nchan_publisher;
      nchan_channel_id $1;
      nchan_redis_pass bench_redis;
      nchan_message_buffer_length 1000;
      nchan_message_timeout 60s;
    }
    # Multiplexed: /sub/f0,f1,… subscribes one connection to every channel named.
    location ~ ^/sub/([a-z0-9,]+)$ {
      nchan_subscriber eventsource;
      nchan_channel_id $1;
      nchan_channel_id_split_delimiter ",";
      nchan_redis_pass bench_redis;
    }
  }
}
`;

/** The error log's last lines, without the start-up notices every run writes. */
const readErrorLog = (file: string): string => {
  if (!existsSync(file)) return '';
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => /\[(warn|error|crit|alert|emerg)\]/.test(l))
    // nchan logs these for the Redis replies still pending when nginx is stopped: not a run's error.
    .filter((l) => !l.includes('got a NULL redis reply'))
    // …and these for the messages its workers still hold at a fast shutdown (worker_processes > 1).
    .filter((l) => !l.includes('force-reaping msg'));
  if (lines.length === 0) return '';
  return [...lines.slice(0, 5), `… ${lines.length} lines`, ...lines.slice(-3)].join('\n');
};

export const startNchan = async (opts: ServerOptions = {}): Promise<Server> => {
  const cores = opts.cores ?? SERVER_CORE;
  const dir = tempDir('bench-nchan-');
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d));
  const [port, redisPort] = [await freePort(), await freePort()];
  const redis = await startPinnedRedis(redisPort, cores);
  writeFileSync(join(dir, 'nginx.conf'), nginxConf(dir, port, redisPort, opts.workers ?? 1));
  const nginx = spawnPinned(
    cores,
    'nginx',
    ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const stop = async (): Promise<void> => {
    // nginx's master stops its worker on SIGTERM (fast shutdown).
    await stopProcess(nginx);
    const log = readErrorLog(join(dir, 'error.log'));
    if (log) console.warn(`nginx error.log (last lines):\n${log}`);
    await stopProcess(redis);
    removeDir(dir);
  };
  try {
    await waitForPort(port, 10_000, 'nginx');
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    subUrl: `http://127.0.0.1:${port}/sub`,
    pubUrl: `http://127.0.0.1:${port}/pub`,
    pids: [nginx.pid!, redis.pid!],
    stop,
  };
};

/** Where the gateway's stdout goes: BENCH_GATEWAY_STDOUT (see gateway-build.ts), else nowhere. */
const gatewayStdout = (): number | 'ignore' => {
  const file = process.env.BENCH_GATEWAY_STDOUT;
  return file ? openSync(file, 'a') : 'ignore';
};

/**
 * The gateway process watching `capsuleUrl` as capsule `bench` (or `opts.capsules`), embedded store
 * unless `redis`. BENCH_GATEWAY_CONFIG (a JSON object) adds to its config file, to compare a setting
 * within one sitting, e.g. `{"appendLingerMs":0}`.
 */
export const startGateway = async (
  capsuleUrl: string,
  redis: boolean,
  opts: ServerOptions & { capsules?: { id: string; url: string }[] } = {},
): Promise<Server> => {
  const cores = opts.cores ?? SERVER_CORE;
  const dir = tempDir('bench-gw-');
  const port = await freePort();
  const redisPort = redis ? await freePort() : 0;
  const redisProc = redis ? await startPinnedRedis(redisPort, cores) : null;
  const config = join(dir, 'gateway.json');
  const extra = JSON.parse(process.env.BENCH_GATEWAY_CONFIG ?? '{}') as Record<string, unknown>;
  const capsules = opts.capsules ?? [{ id: 'bench', url: capsuleUrl }];
  const settings = { logLevel: 'warn', capsules, ...extra };
  writeFileSync(config, JSON.stringify(settings));
  const args = ['--config', config, '--host', '127.0.0.1', '--port', String(port)];
  if (redis) args.push('--redis', `redis://127.0.0.1:${redisPort}`);
  // The primary hands connections to the workers (node:cluster); its CPU counts with theirs.
  if ((opts.workers ?? 1) > 1) args.push('--workers', String(opts.workers));
  const launch = gatewayLaunch();
  const gw = spawnPinned(cores, launch.cmd, args, {
    cwd: REPO,
    stdio: ['ignore', gatewayStdout(), 'inherit'],
    env: { ...process.env, ...launch.env, REDIS_URL: '', NODE_ENV: 'production' },
  });
  const stop = async (): Promise<void> => {
    await stopProcess(gw, 5000);
    if (redisProc) await stopProcess(redisProc);
    removeDir(dir);
  };
  try {
    await waitForPort(port, 30_000, 'the gateway');
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    subUrl: `http://127.0.0.1:${port}/murmur/${capsules[0]!.id}/events`,
    baseUrl: `http://127.0.0.1:${port}`,
    pids: redisProc ? [gw.pid!, redisProc.pid!] : [gw.pid!],
    stop,
  };
};
