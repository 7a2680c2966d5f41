/**
 * A recorded workload for the per-context read tests: real simulator tasks (chunks, thinking, tools,
 * input waits, a reply, a failure) in a few contexts, recorded once, then interleaved into one log
 * with submissions, facts, tasks whose first status is missing and chunks of tasks never seen.
 */
import { ContextTracker, viewFrame } from '../../src/log/frame-view.js';
import type { FactEntry, FrameEntry, LogEntry, LogRecord } from '../../src/log/record.js';
import { startSimulator } from '../../src/simulator/index.js';
import { prng } from '../../src/simulator/workload.js';

export interface RecordedTask {
  contextId: string;
  text: string;
  frames: FrameEntry[];
}

const SCRIPTS = [
  'hello there',
  `#sim ${JSON.stringify({ chunks: 4, thinking: 2, delayMs: 0 })}`,
  `#sim ${JSON.stringify({ tools: 2, chunks: 2, thinking: 1, delayMs: 0 })}`,
  `#sim ${JSON.stringify({ input: { prompt: 'Which branch?', outcome: 'answer', afterMs: 20 }, chunks: 2, delayMs: 0 })}`,
  `#sim ${JSON.stringify({ tools: 1, toolError: true, fail: 'max_turns exceeded', turns: 1, delayMs: 0 })}`,
  `#sim ${JSON.stringify({ reply: 'A whole reply, written at once.', delayMs: 0 })}`,
  `#sim ${JSON.stringify({ input: { prompt: 'Deploy?', outcome: 'timeout', afterMs: 20 }, chunks: 2, delayMs: 0 })}`,
  `#sim ${JSON.stringify({ chunks: 2, thinking: 1, reopen: true, delayMs: 0 })}`,
];

export const CONTEXTS = ['ctx-a', 'ctx-b', 'ctx-c', 'ctx-d', 'ctx-e'];

/** Run `count` tasks on a simulated capsule and keep each task's frames, as the capsule wrote them. */
export const recordTasks = async (count = 16): Promise<RecordedTask[]> => {
  const sim = await startSimulator({ taskAcceptance: 'queue', heartbeatMs: 60_000 });
  try {
    const handles = Array.from({ length: count }, (_, i) => {
      const text = SCRIPTS[i % SCRIPTS.length]!;
      const contextId = CONTEXTS[i % CONTEXTS.length]!;
      return { text, contextId, handle: sim.submit(text, contextId) };
    });
    await Promise.all(handles.map((h) => h.handle.done.catch(() => undefined)));
    await sim.idle();
    const byTask = new Map<string, FrameEntry[]>();
    for (const f of sim.written) {
      let taskId: string | null = null;
      try {
        taskId = (JSON.parse(f.data) as { id?: string }).id ?? null;
      } catch {
        taskId = null;
      }
      if (!taskId) continue;
      const list = byTask.get(taskId) ?? [];
      list.push({ kind: 'frame', event: f.event, upstreamId: f.id, data: f.data, receivedAt: 1 });
      byTask.set(taskId, list);
    }
    return handles.map((h) => ({
      contextId: h.contextId,
      text: h.text,
      frames: byTask.get(h.handle.taskId) ?? [],
    }));
  } finally {
    await sim.stop();
  }
};

const fact = (n: number): FactEntry =>
  n % 3 === 0
    ? { kind: 'fact', fact: 'upstream-connected', ack: '{}', attempt: n, receivedAt: 1 }
    : n % 3 === 1
      ? { kind: 'fact', fact: 'frames-possibly-missing', reason: 'gap', receivedAt: 1 }
      : { kind: 'fact', fact: 'capsule-session-started', reason: 'restart', receivedAt: 1 };

/**
 * One log: each task's submission then its frames, tasks interleaved at random (each in its own
 * order), facts sprinkled in; some tasks lose their first status (their chunks come before any frame
 * that names their context), and chunks of a task never seen anywhere appear.
 */
export const buildLog = (tasks: RecordedTask[], seed: number): LogEntry[] => {
  const r = prng(seed);
  const queues: LogEntry[][] = tasks.map((task, i) => {
    const lostFirst = r() < 0.3;
    const frames = lostFirst ? task.frames.slice(1) : task.frames;
    const taskId = task.frames.map((f) => viewFrame({ ...f, offset: 0 })?.taskId).find(Boolean);
    // A BeeOS submission's accepted outcome names the capsule task: the link when its status is lost.
    const link = r();
    const outcome: LogEntry[] =
      lostFirst && taskId && link < 0.25
        ? [
            {
              kind: 'fact',
              fact: 'submission-started',
              messageId: `msg-${seed}-${i}`,
              contextId: task.contextId,
              taskId,
              receivedAt: 1,
            },
          ]
        : lostFirst && taskId && link < 0.5
          ? [
              {
                kind: 'submission',
                protocol: 'beeos',
                owner: null,
                contextId: task.contextId,
                messageId: `out-${seed}-${i}`,
                text: '',
                meta: { op: 'outcome', outcome: 'accepted', taskId },
                receivedAt: 1,
              },
            ]
          : [];
    const submission: LogEntry = {
      kind: 'submission',
      protocol: i % 2 ? 'flue' : 'beeos',
      owner: null,
      contextId: task.contextId,
      messageId: `msg-${seed}-${i}`,
      text: task.text,
      receivedAt: 1,
    };
    // The outcome is written once the capsule answered: after a few of the task's frames, at times.
    const at = Math.floor(r() * Math.min(3, frames.length));
    return [submission, ...frames.slice(0, at), ...outcome, ...frames.slice(at)];
  });
  queues.push(
    Array.from({ length: 3 }, (_, k) => ({
      kind: 'frame',
      event: 'text',
      upstreamId: String(k),
      data: JSON.stringify({ id: `tsk_orphan_${seed}`, text: `lost ${k}`, final: false }),
      receivedAt: 1,
    })),
  );
  const out: LogEntry[] = [];
  let facts = 0;
  while (queues.some((q) => q.length > 0)) {
    if (r() < 0.04) out.push(fact(facts++));
    const live = queues.filter((q) => q.length > 0);
    out.push(live[Math.floor(r() * live.length)]!.shift()!);
  }
  return out;
};

/** Every context a log names (submissions and frames), plus one no record names. */
export const contextsOf = (records: readonly LogRecord[]): string[] => {
  const ids = new Set<string>(['ctx-nobody']);
  const tracker = new ContextTracker();
  for (const record of records) {
    const c = tracker.contextOf(record);
    if (c) ids.add(c);
  }
  return [...ids];
};

/**
 * What a whole-capsule read attributes (ContextTracker), per record: its context; null for a record
 * every context's read must include (facts, frames of no task); `task:<id>` for the frames of a task
 * no record of the log links to a context (no context reads them). A frame read before its task's
 * context was known belongs to the context the log names for the task later.
 */
export const attribute = (records: readonly LogRecord[]): Map<number, string | null> => {
  const tracker = new ContextTracker();
  const out = new Map<number, string | null>();
  const pending = new Map<string, number[]>();
  const settle = (task: string, context: string): void => {
    for (const offset of pending.get(task) ?? []) out.set(offset, context);
    pending.delete(task);
  };
  for (const record of records) {
    if (record.kind === 'fact' && record.fact === 'submission-started') {
      tracker.link(record.taskId, record.contextId);
      settle(record.taskId, record.contextId);
    }
    if (record.kind === 'submission') {
      const task = record.meta?.op === 'outcome' ? record.meta.taskId : undefined;
      if (typeof task === 'string') {
        tracker.link(task, record.contextId);
        settle(task, record.contextId);
      }
    }
    const context = tracker.contextOf(record);
    const task = viewFrame(record)?.taskId ?? null;
    if (task !== null && context !== null) settle(task, context);
    if (task !== null && context === null) pending.set(task, [...(pending.get(task) ?? []), record.offset]);
    out.set(record.offset, context);
  }
  for (const [task, offsets] of pending) for (const offset of offsets) out.set(offset, `task:${task}`);
  return out;
};
