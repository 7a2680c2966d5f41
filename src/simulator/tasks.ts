/**
 * The capsule's task runner for one session: acceptance (single / queue), the queue, cancel of a
 * running or queued task, reopen, tasks/get state and idle(). Frame content lives in run-script.ts;
 * broadcasting (buffer, connections, `written`) is the caller's `write`.
 */
import { Counter, REJECTED_ID, TASK_COUNTER_START, mintContextId, mintTaskId } from './ids.js';
import { statusFrame, type Frame, type TaskState } from './frames.js';
import { parseScript, type Script } from './script.js';
import { runAttempt, type AttemptContext } from './run-script.js';

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
  counter: Counter;
  abort: AbortController;
  resolve: (o: TaskOutcome) => void;
}

export interface RunnerDeps {
  acceptance: Acceptance;
  frameDelayMs: number;
  chunk: Counter;
  queuedCancel: Counter;
  /** Broadcast a frame (replay buffer, connections, `written`). */
  write: (frame: Frame) => void;
}

export type SubmitResult =
  { kind: 'accepted'; task: TaskEntry } | { kind: 'rejected'; task: TaskEntry; frame: Frame };
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
      const frame = statusFrame(
        { taskId: task.taskId, contextId: task.contextId, state: 'rejected', message: task.message },
        REJECTED_ID,
      );
      return { kind: 'rejected', task, frame };
    }
    this.remember(task);
    this.queue.push(task);
    if (!this.current) this.startNext();
    return { kind: 'accepted', task };
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

  /** The session ends (restart / stop): every task is lost, nothing more is written. */
  shutdown(): void {
    this.dead = true;
    for (const task of [...(this.current ? [this.current] : []), ...this.queue]) {
      this.finish(task, 'lost', 'capsule process exited');
      this.settle(task);
      task.abort.abort();
    }
    this.current = null;
    this.queue.length = 0;
    this.notifyIdle();
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
    const ctx: AttemptContext = {
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
        const outcome = await runAttempt(task.script, ctx);
        if (outcome.state === 'completed' && task.script.reopen && attempt === 1) {
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
