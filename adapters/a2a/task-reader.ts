/**
 * Reading A2A tasks from the log through the core's per-context reads: a task's fold as of the
 * head (GetTask, a snapshot), and its events after a cursor, live (the streaming methods). Every
 * replica reads the same log, so any replica serves any task.
 */
import type { GatewayCore } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import { a2aMetaOf, TaskProjector, type TaskEvent } from './projection.js';

const PAGE = 500;

/** Fold `task` over its context's records after its cursor, up to the head as of the call. */
export const catchUp = async (
  core: GatewayCore,
  capsule: string,
  logContext: string,
  task: TaskProjector,
  /** Awaited when it returns a promise: a stream waits for its client's room before it reads on. */
  onEvent?: (e: TaskEvent, offset: number) => void | Promise<void>,
): Promise<void> => {
  for (;;) {
    const tasks = task.capsuleTaskId ? [task.capsuleTaskId] : [];
    const page = await core.readContext(capsule, logContext, task.cursor, PAGE, tasks);
    for (const r of page.records) {
      const e = task.apply(r);
      if (e && onEvent) await onEvent(e, r.offset);
    }
    if (page.next > task.cursor) task.cursor = page.next;
    if (page.records.length < PAGE) return;
  }
};

/** The task folded to the head, or null when its context holds no such submission. */
export const readTask = async (
  core: GatewayCore,
  capsule: string,
  logContext: string,
  taskId: string,
): Promise<TaskProjector | null> => {
  const task = new TaskProjector(taskId);
  await catchUp(core, capsule, logContext, task);
  return task.meta ? task : null;
};

/**
 * Follow `task` live: each event after the fold's cursor goes to `onEvent` (with its record's
 * offset) until the task ends, `signal` aborts, or `idle` (called after each quiet `waitMs`) says so.
 */
export const follow = async (
  core: GatewayCore,
  capsule: string,
  logContext: string,
  task: TaskProjector,
  onEvent: (e: TaskEvent, offset: number) => void | Promise<void>,
  options: { waitMs: number; signal: AbortSignal; idle?: () => void | Promise<void> },
): Promise<void> => {
  while (!task.terminal && !options.signal.aborted) {
    const woke = await core.waitAfter(capsule, task.cursor, 1, options.waitMs, options.signal);
    if (options.signal.aborted) return;
    if (woke.timedOut && woke.records.length === 0) {
      await options.idle?.();
      continue;
    }
    await catchUp(core, capsule, logContext, task, onEvent);
  }
};

/** Every A2A task of `owner` in the capsule's log, by task id and log context (ListTasks). */
export const ownerTasks = async (
  core: GatewayCore,
  capsule: string,
  owner: string,
  maxScan: number,
): Promise<{ taskId: string; offset: number; logContext: string }[]> => {
  const found: { taskId: string; offset: number; logContext: string }[] = [];
  let after = 0;
  let scanned = 0;
  for (;;) {
    const { records } = await core.read(capsule, after, PAGE);
    for (const r of records as LogRecord[]) {
      const m = a2aMetaOf(r);
      if (m && m.owner === owner && r.kind === 'submission')
        found.push({ taskId: m.taskId, offset: r.offset, logContext: r.contextId });
      after = r.offset;
    }
    scanned += records.length;
    if (records.length < PAGE || scanned >= maxScan) return found;
  }
};
