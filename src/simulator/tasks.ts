/**
 * The capsule's task runner for one session: acceptance (single / queue), the queue, cancel of a
 * running or queued task, reopen, tasks/get state and idle(). Frame content lives in run-script.ts;
 * broadcasting (buffer, connections, `written`) is the caller's `write`.
 */
import { Counter, REJECTED_ID, TASK_COUNTER_START, mintContextId, mintTaskId } from './ids.js';
import { statusFrame, type Frame, type TaskState } from './frames.js';
import { parseScript, type Script } from './script.js';
import { runAttempt, type AttemptContext } from './run-script.js';
import type { LineRules } from './release-line.js';

export type Acceptance = 'none' | 'single' | 'queue';
export interface TaskOutcome {
  state: string;
  response?: string;
}

export interface TaskEntry {
  taskId: string;
  contextId: string;
  state: TaskState | 'submitted' | 'lost';
  message: string;
  response?: string;
  done: Promise<TaskOutcome>;
}

interface InternalTask extends TaskEntry {
  script: Script;
  /** Inference turns written so far over every attempt (0.6+ numbers the next turn after them). */
  turnsUsed: number;
  counter: Counter;
  abort: AbortController;
  resolve: (o: TaskOutcome) => void;
}

export interface RunnerDeps {
  acceptance: Acceptance;
  frameDelayMs: number;
  chunk: Counter;
  queuedCancel: Counter;
  rules: LineRules;
  /** Broadcast a frame (replay buffer, connections, `written`). */
  write: (frame: Frame) => void;
}

export type SubmitResult =
  { kind: 'accepted'; task: TaskEntry } | { kind: 'rejected'; task: TaskEntry; frame: Frame };
/** A queued task refused because its session is closing (0.5+), with the frame for its submitter. */
export interface ClosedQueueEntry {
  taskId: string;
  frame: Frame;
}
export type ContinueResult = SubmitResult | { kind: 'not-found' } | { kind: 'not-continuable' };
export type CancelResult =
  { ok: true; task: TaskEntry } | { ok: false; reason: 'not-found' | 'not-cancelable' };

const CANCELED = new Error('task canceled');
const MAX_REMEMBERED = 1000;
const FINAL: ReadonlySet<string> = new Set(['completed', 'failed', 'canceled', 'rejected', 'lost']);

/** An abortable pause; 0 ms still yields (setImmediate) so readers get to run between frames. */
const pause = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(CANCELED);
    const onAbort = (): void => {
      if (ms > 0) clearTimeout(timer as NodeJS.Timeout);
      else clearImmediate(timer as NodeJS.Immediate);
      reject(CANCELED);
    };
    const done = (): void => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    const timer = ms > 0 ? setTimeout(done, ms) : setImmediate(done);
    signal.addEventListener('abort', onAbort, { once: true });
  });

export class TaskRunner {
  private readonly tasks = new Map<string, InternalTask>();
  private readonly queue: InternalTask[] = [];
  private current: InternalTask | null = null;
  private idleWaiters: (() => void)[] = [];
  private dead = false;

  constructor(private readonly deps: RunnerDeps) {}

  /** A task is running (any attempt, any wait) or queued. */
  get busy(): boolean {
    return this.current !== null || this.queue.length > 0;
  }

  /** Accept a task as message/stream does: `single` rejects while busy, `queue` queues. */
  submit(text: string, contextId?: string): SubmitResult {
    const task = this.create(text, contextId);
    if (this.deps.acceptance !== 'queue' && this.busy) {
      task.state = 'rejected';
      task.message = 'task rejected: capsule is busy';
      task.resolve({ state: 'rejected' });
      return { kind: 'rejected', task, frame: this.rejectedFrame(task, task.message) };
    }
    this.remember(task);
    return this.enqueue(task);
  }

  /**
   * 1.0: a message with `taskId` continues an ended task: a new attempt of the same task (same ids,
   * turns still counting) from the new message's script. A task still running or queued cannot be.
   */
  continueTask(taskId: string, text: string): ContinueResult {
    const task = this.tasks.get(taskId);
    if (!task) return { kind: 'not-found' };
    if (!FINAL.has(task.state)) return { kind: 'not-continuable' };
    if (this.deps.acceptance !== 'queue' && this.busy) {
      // Refused like a new task while busy; the ended task itself stays as it was.
      return { kind: 'rejected', task, frame: this.rejectedFrame(task, 'task rejected: capsule is busy') };
    }
    const fresh = this.create(text, task.contextId);
    Object.assign(task, {
      state: 'submitted',
      message: 'queued',
      done: fresh.done,
      resolve: fresh.resolve,
      script: fresh.script,
      counter: fresh.counter,
      abort: fresh.abort,
    });
    delete task.response;
    return this.enqueue(task);
  }

  /**
   * 0.5+: the session is closing, so every queued task ends `rejected` (spec line: they are lost with
   * the process). Returns the frames for their submitters; like every `rejected`, never broadcast.
   */
  closeQueue(): ClosedQueueEntry[] {
    if (!this.deps.rules.rejectsQueuedOnEnd) return [];
    const message = 'task rejected: the session is closing';
    const closed = this.queue.splice(0).map((task) => {
      this.finish(task, 'rejected', message);
      this.settle(task);
      return { taskId: task.taskId, frame: this.rejectedFrame(task, message) };
    });
    this.notifyIdle();
    return closed;
  }

  get(taskId: string): TaskEntry | undefined {
    return this.tasks.get(taskId);
  }

  /** Cancel: running → `task canceled` (task counter); queued → queued-cancel counter. */
  cancel(taskId: string): CancelResult {
    const task = this.tasks.get(taskId);
    if (!task) return { ok: false, reason: 'not-found' };
    if (FINAL.has(task.state)) return { ok: false, reason: 'not-cancelable' };
    const { contextId } = task;
    if (task === this.current) {
      const message = 'task canceled';
      this.deps.write(statusFrame({ taskId, contextId, state: 'canceled', message }, task.counter.next()));
      this.finish(task, 'canceled', message);
      task.abort.abort();
      // The capsule is free at once: the aborted loop only unwinds, and the next queued task starts.
      this.current = null;
      this.settle(task);
      this.startNext();
      return { ok: true, task };
    }
    const message = 'task canceled before it started';
    this.queue.splice(this.queue.indexOf(task), 1);
    const id = this.deps.queuedCancel.next();
    this.deps.write(statusFrame({ taskId, contextId, state: 'canceled', message }, id));
    this.finish(task, 'canceled', message);
    this.settle(task);
    this.notifyIdle();
    return { ok: true, task };
  }

  /** Resolves when nothing runs and nothing is queued. */
  idle(): Promise<void> {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The session ends (restart / stop): every task is lost (0.5+: queued ones rejected), nothing more is written. */
  shutdown(): ClosedQueueEntry[] {
    const closed = this.closeQueue();
    this.dead = true;
    for (const task of [...(this.current ? [this.current] : []), ...this.queue]) {
      this.finish(task, 'lost', 'capsule process exited');
      this.settle(task);
      task.abort.abort();
    }
    this.current = null;
    this.queue.length = 0;
    this.notifyIdle();
    return closed;
  }

  private enqueue(task: InternalTask): SubmitResult {
    this.queue.push(task);
    if (!this.current) this.startNext();
    return { kind: 'accepted', task };
  }

  /** `rejected`: id 0 on the spec's line; from 0.4 it has no id line at all. */
  private rejectedFrame(task: InternalTask, message: string): Frame {
    const id = this.deps.rules.sequenceIds ? null : REJECTED_ID;
    return statusFrame({ taskId: task.taskId, contextId: task.contextId, state: 'rejected', message }, id);
  }

  private create(text: string, contextId?: string): InternalTask {
    let resolve: (o: TaskOutcome) => void = () => {};
    const done = new Promise<TaskOutcome>((r) => (resolve = r));
    return {
      taskId: mintTaskId(),
      contextId: contextId ?? mintContextId(),
      state: 'submitted',
      message: 'queued',
      done,
      script: parseScript(text),
      turnsUsed: 0,
      counter: new Counter(TASK_COUNTER_START),
      abort: new AbortController(),
      resolve,
    };
  }

  private remember(task: InternalTask): void {
    this.tasks.set(task.taskId, task);
    if (this.tasks.size <= MAX_REMEMBERED) return;
    for (const [id, t] of this.tasks) {
      if (FINAL.has(t.state)) {
        this.tasks.delete(id);
        break;
      }
    }
  }

  private finish(task: InternalTask, state: TaskEntry['state'], message: string, response?: string): void {
    if (FINAL.has(task.state)) return;
    task.state = state;
    task.message = message;
    if (response !== undefined) task.response = response;
  }

  /** Resolve `done` (only once the runner no longer counts the task as running). */
  private settle(task: InternalTask): void {
    const { state, response } = task;
    task.resolve(response === undefined ? { state } : { state, response });
  }

  private startNext(): void {
    const next = this.queue.shift();
    this.current = next ?? null;
    if (!next) return this.notifyIdle();
    void this.run(next).finally(() => {
      if (this.dead || this.current !== next) return;
      this.current = null;
      this.settle(next);
      this.startNext();
    });
  }

  private async run(task: InternalTask): Promise<void> {
    const signal = task.abort.signal;
    const delay = task.script.delayMs ?? this.deps.frameDelayMs;
    let burstCount = 0;
    const rules = this.deps.rules;
    const ctx: AttemptContext = {
      firstTurn: 1,
      reopenAs: null,
      oneFinal: rules.oneFinal,
      toolCallFrames: rules.toolCallFrames,
      taskId: task.taskId,
      contextId: task.contextId,
      counter: task.counter,
      chunk: this.deps.chunk,
      emit: async (build) => {
        // A burst yields only every 256 frames, so readers run but the capsule is never idle.
        if (!task.script.burst || ++burstCount % 256 === 0) await pause(delay, signal);
        if (signal.aborted || this.dead) throw CANCELED;
        this.deps.write(build());
      },
      wait: (ms) => pause(ms, signal),
      hold: () => pause(2 ** 31 - 1, signal).then(() => ctx.hold()),
      setState: (state, message) => {
        task.state = state;
        task.message = message;
      },
    };
    try {
      // max_task_reopens 1: an on-task-end hook reopens a completed task once; ids restart at 0.
      for (let attempt = 1; ; attempt++) {
        const reopens = task.script.reopen && attempt === 1;
        ctx.firstTurn = rules.turnsAcrossReopen ? task.turnsUsed + 1 : 1;
        // 0.5+: the hook decides before the final is written, so the attempt ends non-final.
        ctx.reopenAs = reopens && rules.oneFinal ? attempt : null;
        const outcome = await runAttempt(task.script, ctx);
        task.turnsUsed += task.script.turns;
        if (outcome.state === 'completed' && reopens) {
          task.counter.value = TASK_COUNTER_START;
          continue;
        }
        this.finish(task, outcome.state, outcome.message, outcome.response);
        return;
      }
    } catch (err) {
      if (err !== CANCELED) throw err;
    }
  }

  private notifyIdle(): void {
    if (this.busy) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
