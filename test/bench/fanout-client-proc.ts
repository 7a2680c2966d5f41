/**
 * One fan-out subscriber process on the client core: fanout-client.c when the machine can build it,
 * fanout-clients.ts otherwise. Either is a ChildProcess that answers the bench's `ask()` with the
 * same messages (`start` → `ready`, `report` → `report`); the C one hears them as lines on its stdin
 * and answers in JSON lines on its stdout, turned here into 'message' events. It has no IPC channel,
 * so `connected` is false and the benches stop it with a signal.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildBenchBinary } from './bench-binaries.js';
import { forkPinned, spawnPinned } from './fanout-procs.js';

interface ClientMsg {
  type: string;
  url?: string;
  urls?: string[];
  subs?: number;
  from?: number;
  to?: number;
  /** Several streams per connection, each data line naming its stream (`start-keyed`). */
  keyed?: boolean;
}

const NODE_CLIENTS = fileURLToPath(new URL('./fanout-clients.ts', import.meta.url));

/** Which clients `startFanoutClient` starts, for the benches' headers. */
export const fanoutClientKind = (): string =>
  buildBenchBinary('fanout-client')
    ? 'C subscribers (fanout-client.c)'
    : 'Node subscribers (fanout-clients.ts)';

/** The `start` message as fanout-client.c's command line: the window, then one URL per subscriber. */
export const startLine = (msg: ClientMsg): string => {
  const n = msg.subs ?? 0;
  const urls = Array.from({ length: n }, (_, i) => msg.urls?.[i % msg.urls.length] ?? msg.url!);
  return `${msg.keyed ? 'start-keyed' : 'start'} ${msg.from ?? 1} ${msg.to ?? 0} ${urls.join(' ')}\n`;
};

export const startFanoutClient = (core: number | string): ChildProcess => {
  const binary = buildBenchBinary('fanout-client');
  if (!binary) return forkPinned(core, NODE_CLIENTS);
  const child = spawnPinned(core, binary, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  createInterface({ input: child.stdout! }).on('line', (line) => child.emit('message', JSON.parse(line)));
  child.stdin!.on('error', () => undefined); // a client already gone: its exit is what the bench sees
  child.send = ((msg: ClientMsg): boolean => {
    if (msg.type === 'start') child.stdin!.write(startLine(msg));
    else if (msg.type === 'report') child.stdin!.write('report\n');
    else child.stdin!.end();
    return true;
  }) as ChildProcess['send'];
  return child;
};
