/** The soak's side of capsule-process.ts: fork one capsule process and talk to it over IPC. */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { WrittenFrame } from '../../src/simulator/index.js';
import type { CapsuleAnswer, CapsuleCommand } from './capsule-process.js';

export interface CapsuleProcess {
  readonly url: string;
  readonly port: number;
  restart(): Promise<number>;
  burst(frames: number): Promise<void>;
  /** Stop the workload, drain, run one last task: its task id. */
  settle(): Promise<string>;
  written(): Promise<WrittenFrame[]>;
  /** Frames it dropped to watchers that fell behind, every session. */
  dropped(): Promise<number>;
  stop(): Promise<void>;
}

type Command = CapsuleCommand extends infer C ? (C extends { seq: number } ? Omit<C, 'seq'> : never) : never;

const ENTRY = fileURLToPath(new URL('./capsule-process.ts', import.meta.url));

/** `queue`: the capsule's live queue per connection (the spec's 128 when omitted). */
export const forkCapsule = async (release: string, queue?: number): Promise<CapsuleProcess> => {
  const child: ChildProcess = fork(ENTRY, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, SOAK_RELEASE: release, ...(queue ? { SOAK_QUEUE: String(queue) } : {}) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let seq = 0;
  child.on('message', (a: CapsuleAnswer) => {
    const w = waiting.get(a.seq);
    if (!w) return;
    waiting.delete(a.seq);
    if (a.ok) w.resolve(a.value);
    else w.reject(new Error(`capsule process: ${a.error}`));
  });
  child.once('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`capsule process exited (${code})`));
    waiting.clear();
  });
  const ask = <T>(cmd: Command | null): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const n = cmd === null ? 0 : ++seq;
      waiting.set(n, { resolve: resolve as (v: unknown) => void, reject });
      if (cmd !== null) child.send({ ...cmd, seq: n });
    });
  const { url, port } = await ask<{ url: string; port: number }>(null);
  return {
    url,
    port,
    restart: () => ask<number>({ op: 'restart' }),
    burst: (frames) => ask<void>({ op: 'burst', frames }),
    settle: () => ask<string>({ op: 'settle' }),
    written: () => ask<WrittenFrame[]>({ op: 'written' }),
    dropped: () => ask<number>({ op: 'dropped' }),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      await ask<void>({ op: 'stop' }).catch(() => undefined);
      await exited;
    },
  };
};
