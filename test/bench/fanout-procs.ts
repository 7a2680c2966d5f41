/**
 * Process plumbing for the fan-out bench (fanout.ts): spawn pinned to a core, read a process tree's
 * CPU and RSS from /proc, read a core's busy fraction, and kill every process the bench started,
 * even on error. Linux only (/proc, taskset); the bench says so and skips when they are missing.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { waitForPort } from '../support/redis-server.js';

export const SERVER_CORE = 0;
export const CLIENT_CORE = 1;

const started = new Set<ChildProcess>();

export const haveCommand = (cmd: string, args: string[] = ['--version']): boolean =>
  spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;

/** Two cores and taskset: otherwise server and clients cannot be kept apart and the figures mean little. */
export const canPin = (): boolean => haveCommand('taskset', ['-V']) && existsSync('/proc/stat');

/**
 * Spawn `cmd` pinned to `core` (a core, or a taskset list such as `0,1`; taskset execs, so the pid
 * is the command's own). Tracked for killAll.
 */
export const spawnPinned = (
  core: number | string,
  cmd: string,
  args: string[],
  opts: SpawnOptions = {},
): ChildProcess => {
  const child = spawn('taskset', ['-c', String(core), cmd, ...args], opts);
  started.add(child);
  child.once('exit', () => started.delete(child));
  return child;
};

/** Stop one process: SIGTERM, then SIGKILL after `graceMs`. Resolves once it has exited. */
export const stopProcess = (child: ChildProcess, graceMs = 2000): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });

/** Every process this module started and that is still alive, SIGKILLed (the bench's last step). */
export const killAll = async (): Promise<void> => {
  await Promise.all([...started].map((c) => stopProcess(c, 500)));
};
/** Not exited, or exited but not yet reaped (a zombie, which the event loop would reap). */
const running = (c: ChildProcess): boolean => {
  try {
    const stat = readFileSync(`/proc/${c.pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
};

/**
 * At exit, synchronously: SIGTERM to everything still running (nginx's master then stops its
 * workers and the gateway's primary its node:cluster workers, which a SIGKILL would leave behind),
 * up to 3 s for them to go, then SIGKILL.
 */
const stopAllNow = (): void => {
  for (const c of started) c.kill('SIGTERM');
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (const deadline = Date.now() + 3000; [...started].some(running) && Date.now() < deadline;)
    Atomics.wait(nap, 0, 0, 50);
  for (const c of started) if (running(c)) c.kill('SIGKILL');
};
// A bench interrupted by an exception, Ctrl-C or a kill must not leave nginx or a gateway listening.
process.once('exit', stopAllNow);
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const)
  process.once(signal, () => process.exit(code));

/** The pid and its direct children (nginx's master and its worker). */
const tree = (pid: number): number[] => {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return [pid, ...(kids ? kids.split(/\s+/).map(Number) : [])];
  } catch {
    return [pid];
  }
};

const TICK_US = 1e6 / 100; // CLK_TCK is 100 on every Linux this runs on (getconf CLK_TCK)

/** utime + stime of one process in µs (10 ms resolution); 0 once it has exited. */
const processCpuUs = (pid: number): number => {
  try {
    // Fields after the parenthesised command name: utime is the 12th, stime the 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_US;
  } catch {
    return 0; // exited: its CPU is lost, which a steady window does not see
  }
};

/** utime + stime of the processes and their direct children, in µs (10 ms resolution). */
export const cpuUs = (pids: number[]): number =>
  pids.flatMap(tree).reduce((sum, pid) => sum + processCpuUs(pid), 0);

/**
 * The same per process, in tree order (each pid, then its direct children): where a server's CPU
 * went among its workers (nginx's, the gateway's node:cluster ones).
 */
export const cpuUsByProcess = (pids: number[]): Map<number, number> =>
  new Map(pids.flatMap(tree).map((pid) => [pid, processCpuUs(pid)]));

/** Resident set of the processes and their direct children, in bytes. */
export const rssBytes = (pids: number[]): number => {
  let kb = 0;
  for (const pid of pids.flatMap(tree)) {
    try {
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      kb += m ? Number(m[1]) : 0;
    } catch {
      // exited
    }
  }
  return kb * 1024;
};

/** Busy and total jiffies of one core (from /proc/stat), for its load over a window. */
export const coreTicks = (core: number): { busy: number; total: number } => {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `));
  if (!line) return { busy: 0, total: 0 };
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
};

export const coreLoad = (a: { busy: number; total: number }, b: { busy: number; total: number }): number =>
  b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : NaN;

export { waitForPort };

/** A throwaway redis-server pinned to the server core(s): no persistence, one per measured run. */
export const startPinnedRedis = async (
  port: number,
  cores: number | string = SERVER_CORE,
): Promise<ChildProcess> => {
  const child = spawnPinned(
    cores,
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
      '--loglevel',
      'warning',
    ],
    { stdio: 'ignore' },
  );
  await waitForPort(port, 5000, 'redis-server');
  return child;
};

/** Request/reply over a child's IPC channel, bounded in time. */
export const ask = <T>(child: ChildProcess, msg: object, reply: string, timeoutMs = 60_000): Promise<T> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', on);
      reject(new Error(`no '${reply}' from child within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (m: { type: string; error?: string }): void => {
      if (m.type === 'error') {
        clearTimeout(timer);
        child.off('message', on);
        reject(new Error(m.error));
      }
      if (m.type !== reply) return;
      clearTimeout(timer);
      child.off('message', on);
      resolve(m as T);
    };
    child.on('message', on);
    child.send(msg);
  });

/** A bench child (TypeScript through tsx) pinned to `core` (or a taskset list), with an IPC channel. */
export const forkPinned = (core: number | string, file: string): ChildProcess =>
  spawnPinned(core, process.execPath, ['--import', 'tsx', file], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
