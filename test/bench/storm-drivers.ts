/**
 * Who plays the resume storm's clients (scale-resume.ts): storm-client.c (bench-binaries.ts builds
 * it), or, without a C compiler, the Node clients of scale-sse-clients.ts. Both open
 * every connection at once, write the request by hand and look for the marker in the raw bytes; the
 * C one costs the client core a fraction of what the Node one did (the storm's Node clients spent
 * more CPU than the gateway and set its pace), so the figure measures the gateway.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ask, spawnPinned, stopProcess } from './fanout-procs.js';
import { share, startClients, stopClients } from './scale-setup.js';
import { buildBenchBinary } from './bench-binaries.js';

export interface StormTarget {
  url: string;
  headers?: Record<string, string>;
}

export interface StormAnswer {
  /** When the process's last connection had its marker (nowMs() clock), and its failures by kind. */
  last: number;
  failed: number;
  errors: [string, number][];
}

export interface StormDriver {
  readonly kind: string;
  readonly pids: number[];
  /** Get ready to open `total` connections to `target` (the C processes start here). */
  prepare(target: StormTarget, marker: string, timeoutMs: number): Promise<void>;
  /** Open them all at once; resolves when each has the marker or failed. */
  go(): Promise<StormAnswer[]>;
  stop(): Promise<void>;
}

/** The request line and headers as the Node raw reader writes them. */
const requestOf = (t: StormTarget): string => {
  const url = new URL(t.url);
  const headers = Object.entries({ accept: 'text/event-stream', ...t.headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `GET ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n${headers}\r\n`;
};

/** A child's stdout as lines, taken one at a time. */
const lineReader = (child: ChildProcess): ((what: string, timeoutMs: number) => Promise<string>) => {
  const lines: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const w = waiters.shift();
    if (w) w(line);
    else lines.push(line);
  });
  return (what, timeoutMs) =>
    new Promise((resolve, reject) => {
      const line = lines.shift();
      if (line !== undefined) return resolve(line);
      const timer = setTimeout(
        () => reject(new Error(`storm client: no ${what} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      waiters.push((l) => {
        clearTimeout(timer);
        resolve(l);
      });
      child.once('exit', (code) => reject(new Error(`storm client exited (${code}) before ${what}`)));
    });
};

/** `procs` storm-client processes on `core`, `total` connections among them. */
const nativeDriver = (binary: string, core: number, procs: number, total: number): StormDriver => {
  let children: ChildProcess[] = [];
  let answers: Promise<string>[] = [];
  return {
    kind: `${procs} C client processes (storm-client.c)`,
    get pids() {
      return children.map((c) => c.pid!);
    },
    async prepare(target, marker, timeoutMs) {
      const url = new URL(target.url);
      const request = requestOf(target);
      children = Array.from({ length: procs }, (_, i) =>
        spawnPinned(
          core,
          binary,
          [url.hostname, url.port, String(share(total, procs, i)), String(timeoutMs), marker, request],
          { stdio: ['pipe', 'pipe', 'inherit'] },
        ),
      );
      const readers = children.map(lineReader);
      await Promise.all(readers.map((next) => next('ready', 10_000)));
      answers = readers.map((next) => next('answer', timeoutMs + 30_000));
      for (const a of answers) a.catch(() => undefined); // go() reports it; unawaited until then
    },
    async go() {
      for (const c of children) c.stdin!.write('go\n');
      return (await Promise.all(answers)).map((line) => JSON.parse(line) as StormAnswer);
    },
    async stop() {
      for (const c of children) c.stdin?.end();
      await Promise.all(children.map((c) => stopProcess(c, 2000)));
    },
  };
};

/** The Node clients (scale-sse-clients.ts), already running when the storm starts. */
const nodeDriver = async (core: number, procs: number, total: number): Promise<StormDriver> => {
  const clients = await startClients(core, procs);
  let open: object = {};
  return {
    kind: `${procs} Node client processes`,
    pids: clients.map((c) => c.pid!),
    prepare: async (target, marker, timeoutMs) => {
      open = { type: 'open', targets: [target], marker, batch: 0, timeoutMs };
    },
    go: () =>
      Promise.all(
        clients.map((c, i) =>
          ask<StormAnswer>(c, { ...open, count: share(total, procs, i) }, 'caught', 180_000),
        ),
      ),
    stop: () => stopClients(clients),
  };
};

/** The C clients when they build, the Node ones otherwise (BENCH_NODE_CLIENTS=1 forces those). */
export const stormDriver = async (core: number, procs: number, total: number): Promise<StormDriver> => {
  const binary = buildBenchBinary('storm-client');
  return binary ? nativeDriver(binary, core, procs, total) : nodeDriver(core, procs, total);
};
