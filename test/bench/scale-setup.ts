/**
 * What the scale benches create through the gateway's public surfaces before measuring: a Flue
 * conversation (with the official SDK) and a BeeOS conversation with one message, each answered by
 * the simulated capsule, so their SSE streams and reads have something real behind them.
 */
import { createFlueClient } from '@flue/sdk';
import { ask, stopProcess } from './fanout-procs.js';
import { forkRaised } from './scale-gateway.js';
import type { ChildProcess } from 'node:child_process';

/** A Flue conversation `conv` on `capsule`, its first message answered. */
export const createFlueConversation = async (base: string, capsule: string, conv: string): Promise<void> => {
  const client = createFlueClient({ url: `${base}/flue/${capsule}/${conv}` });
  const admission = await client.send({ message: { kind: 'user', body: 'hello' } });
  await client.wait(admission);
};

/** A BeeOS conversation on `capsule` with one message posted; its id. */
export const createBeeosConversation = async (base: string, capsule: string): Promise<string> => {
  const root = `${base}/api/v1/agents/${capsule}/conversations`;
  const res = await fetch(root, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const body = (await res.json()) as { data?: { conversation_id?: string }; conversation_id?: string };
  const id = body.data?.conversation_id ?? body.conversation_id;
  if (res.status !== 201 || !id)
    throw new Error(`BeeOS conversation: HTTP ${res.status} ${JSON.stringify(body)}`);
  const msg = await fetch(`${root}/${id}/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ message: 'hello' }),
  });
  if (msg.status !== 202) throw new Error(`BeeOS message: HTTP ${msg.status} ${await msg.text()}`);
  return id;
};

/** Several SSE client processes (scale-sse-clients.ts) on `core`, each answering a ping. */
export const startClients = async (core: number, n: number): Promise<ChildProcess[]> => {
  const file = new URL('./scale-sse-clients.ts', import.meta.url).pathname;
  const procs = Array.from({ length: n }, () => forkRaised(core, file));
  await Promise.all(procs.map((p) => ask(p, { type: 'ping' }, 'pong', 30_000)));
  return procs;
};

export const stopClients = async (procs: ChildProcess[]): Promise<void> => {
  for (const p of procs) if (p.connected) p.send({ type: 'stop' });
  await Promise.all(procs.map((p) => stopProcess(p, 2000)));
};

/** `total` split as evenly as possible over `n` parts. */
export const share = (total: number, n: number, i: number): number =>
  Math.floor(total / n) + (i < total % n ? 1 : 0);

/** The clients' failures by kind, summed over processes: `3 × ECONNRESET before the response; …`. */
export const errorSummary = (answers: { errors: [string, number][] }[]): string => {
  const all = new Map<string, number>();
  for (const a of answers) for (const [k, n] of a.errors) all.set(k, (all.get(k) ?? 0) + n);
  return [...all]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([k, n]) => `${n} × ${k}`)
    .join('; ');
};
