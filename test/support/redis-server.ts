/**
 * A throwaway redis-server on a free loopback port, for tests that need a real Redis (and tests that
 * stop and restart it to simulate an outage, or a rollback to an older snapshot). Never a mock.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const redisServerAvailable = (): boolean => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });

export const waitForPort = async (port: number, timeoutMs: number, what = 'redis-server'): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    // Polling a port that is coming up: there is no event to wait on from outside the process.
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what} did not listen on ${port} within ${timeoutMs} ms`);
};

const DB_FILE = 'dump.rdb';

/**
 * A redis-server on loopback `port`, its files in `dir`, never saving on its own (no RDB schedule,
 * no AOF): a test's Redis holds only what a test asks it to SAVE. `extra` adds options.
 */
export const spawnRedisServer = (port: number, dir: string, extra: string[] = []): ChildProcess =>
  spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...extra,
    ],
    { stdio: 'ignore' },
  );

/** One inline command over a plain socket (no client library in the helper); resolves on +OK. */
const command = (port: number, cmd: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.once('connect', () => socket.write(`${cmd}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (!reply.includes('\r\n')) return;
      socket.destroy();
      if (reply.startsWith('+OK')) resolve();
      else reject(new Error(`redis ${cmd}: ${reply.trim()}`));
    });
    socket.once('error', reject);
  });

export interface RedisServer {
  port: number;
  url: string;
  /**
   * Stop the server (SIGKILL by default: an outage, not a clean shutdown). Nothing is saved on the
   * way down (no save points): only an explicit `snapshot()` survives.
   */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Start it again on the same port: empty, or from the last `snapshot()` (an OLDER state). */
  start(): Promise<void>;
  /** SAVE now: the next `start()` after a stop loads this state, losing everything written since. */
  snapshot(): Promise<void>;
  /** Forget the snapshot: the next `start()` is empty again. */
  dropSnapshot(): void;
  /** Freeze the process (SIGSTOP): unreachable but keeps its data, like a stalled Redis. */
  pause(): void;
  /** Unfreeze it (SIGCONT): it then answers everything buffered meanwhile. */
  resume(): void;
}

/** Start a redis-server with no persistence on a free port (or the given one). */
export const startRedisServer = async (port?: number): Promise<RedisServer> => {
  const p = port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'mg-redis-'));
  let child: ChildProcess | null = null;
  const start = async (): Promise<void> => {
    mkdirSync(dir, { recursive: true }); // removed by a stop() that left no snapshot behind
    child = spawnRedisServer(p, dir, ['--dbfilename', DB_FILE]);
    await waitForPort(p, 10_000);
  };
  const stop = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    const c = child;
    child = null;
    if (c && c.exitCode === null) {
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill(signal);
      });
    }
    // Nothing to restart from: the data dir goes (a later start() makes it again, empty).
    if (!existsSync(join(dir, DB_FILE))) rmSync(dir, { recursive: true, force: true });
  };
  const signal = (sig: NodeJS.Signals): void => {
    const c = child as ChildProcess | null;
    if (c && c.exitCode === null) c.kill(sig);
  };
  await start();
  return {
    port: p,
    url: `redis://127.0.0.1:${p}`,
    stop: async (sig) => {
      signal('SIGCONT'); // a frozen process would not act on SIGTERM
      await stop(sig);
    },
    start,
    snapshot: () => command(p, 'SAVE'),
    dropSnapshot: () => rmSync(join(dir, DB_FILE), { force: true }),
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
  };
};

/** Remove a temp dir quietly (used by callers that made their own). */
export const removeDir = (dir: string): void => rmSync(dir, { recursive: true, force: true });
