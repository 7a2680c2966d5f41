/**
 * Hand-made capsule log records for Flue projection tests: Murmur frames exactly as a capsule writes
 * them (the Murmur streaming protocol), Flue submission/settlement records, facts, and a seeded random
 * workload generator interleaving several tasks and contexts.
 */
import type { LogEntry, LogRecord } from '../../../src/log/record.js';
import { prng } from '../../../src/simulator/workload.js';

export const frame = (event: string, data: Record<string, unknown>): LogEntry => ({
  kind: 'frame',
  event,
  upstreamId: null,
  data: JSON.stringify(data),
  receivedAt: 1_700_000_000_000,
});

export const status = (task: string, ctx: string | null, state: string, message: string, response?: string) =>
  frame('status', {
    id: task,
    ...(ctx ? { context_id: ctx } : {}),
    status: { state, message, ...(response !== undefined ? { response } : {}) },
    final: ['completed', 'failed', 'canceled', 'rejected'].includes(state),
  });

export const text = (task: string, t: string, final = false) => frame('text', { id: task, text: t, final });
export const thinking = (task: string, t: string) => frame('thinking', { id: task, text: t, final: false });
export const artifact = (task: string, callId: string | null, isError: boolean) =>
  frame('artifact', {
    id: task,
    artifact: {
      tool_name: 'bash',
      content: isError ? 'boom' : 'ok',
      fence_source: 'tool:bash',
      tool_call_id: callId,
      is_error: isError,
      duration_ms: 7,
      exit_code: isError ? null : 0,
      truncated: false,
    },
  });

export const submission = (
  ctx: string,
  submissionId: string,
  body: string,
  opts: { kind?: 'user' | 'signal'; protocol?: 'flue' | 'beeos' } = {},
): LogEntry => ({
  kind: 'submission',
  protocol: opts.protocol ?? 'flue',
  owner: null,
  contextId: ctx,
  messageId: `msg_${submissionId}`,
  text: body,
  meta:
    opts.protocol === 'beeos'
      ? {}
      : {
          flue: 'message',
          submissionId,
          uid: `uid_${ctx}`,
          kind: opts.kind ?? 'user',
          body,
          ...(opts.kind === 'signal'
            ? { signal: { type: 'ping', tagName: 'ping', attributes: { a: '1' } } }
            : {}),
        },
  receivedAt: 1_700_000_000_000,
});

export const settlement = (ctx: string, submissionId: string): LogEntry => ({
  kind: 'submission',
  protocol: 'flue',
  owner: null,
  contextId: ctx,
  messageId: `msg_${submissionId}`,
  text: '',
  meta: { flue: 'settlement', submissionId, outcome: 'failed', error: { message: 'capsule is busy' } },
  receivedAt: 1_700_000_000_000,
});

export const sessionStarted = (): LogEntry => ({
  kind: 'fact',
  fact: 'capsule-session-started',
  reason: 'restart',
  receivedAt: 1_700_000_000_000,
});

/** Number records from 1, as a store would. */
export const numbered = (entries: LogEntry[]): LogRecord[] =>
  entries.map((e, i) => ({ ...e, offset: i + 1 }));

/** Seeded PRNG, so a failing workload can be replayed from its seed. */
export { prng };

/** The frames one task writes, in order, for a random script. */
const taskFrames = (rand: () => number, task: string, ctx: string): LogEntry[] => {
  const out: LogEntry[] = [status(task, ctx, 'working', 'inference turn 1')];
  const pick = (n: number) => Math.floor(rand() * n);
  for (let i = pick(3); i > 0; i--) out.push(thinking(task, `think${i} `));
  for (let i = pick(3); i > 0; i--)
    out.push(artifact(task, rand() < 0.8 ? `call_${pick(3)}` : null, rand() < 0.3));
  if (rand() < 0.2) {
    out.push(status(task, null, 'input-required', 'Which file?'));
    out.push(
      rand() < 0.5 ? status(task, null, 'working', 'resumed') : status(task, null, 'failed', 'input-timeout'),
    );
  }
  if (rand() < 0.5) {
    for (let i = 1 + pick(4); i > 0; i--) out.push(text(task, `w${i} `));
    out.push(text(task, '', true));
  } else out.push(text(task, 'whole reply', true));
  const end = rand();
  if (end < 0.6) out.push(status(task, ctx, 'completed', 'session ended', 'reply'));
  else if (end < 0.8) out.push(status(task, ctx, 'failed', 'driver invocation failed: x'));
  else if (end < 0.95) out.push(status(task, ctx, 'canceled', 'task canceled'));
  // else: the task never ends (cut short by a restart or still running)
  return out;
};

/**
 * A random capsule log: submissions on the target and other contexts, their tasks' frames
 * interleaved (one task at a time per context, like a capsule), busy rejections settled by the
 * surface, foreign-protocol submissions and capsule restarts.
 */
export const randomWorkload = (seed: number, target: string): LogRecord[] => {
  const rand = prng(seed);
  const contexts = [target, 'ctx_other', target];
  const streams: LogEntry[][] = [];
  let n = 0;
  for (const ctx of contexts) {
    const stream: LogEntry[] = [];
    const turns = 1 + Math.floor(rand() * 4);
    for (let t = 0; t < turns; t++) {
      const sub = `s${seed}_${n++}`;
      const roll = rand();
      if (roll < 0.1) {
        stream.push(submission(ctx, sub, `hi ${sub}`), settlement(ctx, sub));
        continue;
      }
      stream.push(
        submission(ctx, sub, `hi ${sub}`, {
          kind: roll < 0.25 ? 'signal' : 'user',
          protocol: roll > 0.95 ? 'beeos' : 'flue',
        }),
      );
      stream.push(...taskFrames(rand, `tsk_${sub}`, ctx));
    }
    streams.push(stream);
  }
  const out: LogEntry[] = [];
  // Bounded: every pass removes one entry from a non-empty stream.
  while (streams.some((s) => s.length > 0)) {
    const live = streams.filter((s) => s.length > 0);
    const s = live[Math.floor(rand() * live.length)]!;
    out.push(s.shift()!);
    if (rand() < 0.02) out.push(sessionStarted());
  }
  return numbered(out);
};
