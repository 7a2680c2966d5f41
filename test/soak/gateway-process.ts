/**
 * The gateway as a user runs it, in its own process (`node --import tsx src/cli.ts …`), so a test can
 * SIGKILL it, or SIGSTOP it to stall its whole event loop, and restart it with the same arguments.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface GatewayProcess {
  readonly url: string;
  /** Start (or start again after kill) with the same arguments; resolves once it listens. */
  start(): Promise<void>;
  /** SIGKILL: no drain, nothing flushed. */
  kill(): Promise<void>;
  /** Freeze the whole process (its event loop, its sockets unread) until resume(). */
  pause(): void;
  resume(): void;
  /** SIGTERM and wait for the drain. */
  stop(): Promise<void>;
  /** Lines the process wrote to stderr and stdout (pino JSON and the banner), for failure messages. */
  readonly output: string[];
}

export const gatewayProcess = (port: number, args: string[], env: NodeJS.ProcessEnv = {}): GatewayProcess => {
  let child: ChildProcess | null = null;
  const output: string[] = [];
  const exited = (c: ChildProcess): Promise<void> =>
    c.exitCode !== null || c.signalCode !== null
      ? Promise.resolve()
      : new Promise((resolve) => c.once('exit', () => resolve()));

  const start = async (): Promise<void> => {
    const c = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', '--host', '127.0.0.1', '--port', String(port), ...args],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
    );
    child = c;
    createInterface({ input: c.stderr! }).on('line', (l) => output.push(l));
    const lines = createInterface({ input: c.stdout! });
    await new Promise<void>((resolve, reject) => {
      const onExit = (code: number | null): void =>
        reject(new Error(`gateway exited (${code}) before listening:\n${output.slice(-20).join('\n')}`));
      c.once('exit', onExit);
      lines.on('line', (line) => {
        output.push(line);
        if (line.includes('murmur-gateway listening on')) {
          c.off('exit', onExit);
          resolve();
        }
      });
    });
  };

  return {
    url: `http://127.0.0.1:${port}`,
    output,
    start,
    kill: async () => {
      const c = child;
      if (!c) return;
      c.kill('SIGCONT');
      c.kill('SIGKILL');
      await exited(c);
      child = null;
    },
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    stop: async () => {
      const c = child;
      if (!c) return;
      c.kill('SIGCONT');
      c.kill('SIGTERM');
      await exited(c);
      child = null;
    },
  };
};
