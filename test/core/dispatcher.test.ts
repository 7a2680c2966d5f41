/**
 * The dispatcher against a log held in memory and a stand-in capsule: it learns the capsule's
 * `lifecycle.task_acceptance` from its answers. A `queue` capsule is handed a message while a task
 * another client started runs; a `single` one answers `rejected` once, and from then on is handed
 * the next message only after the running task's final status is in the log, until a
 * `capsule-session-started` fact says the capsule (and maybe its configuration) is new.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Dispatcher, type QueueView } from '../../src/core/dispatcher.js';
import { QueueFold } from '../../src/core/queue-fold.js';
import type { SubmitOutcome, UpstreamPort, WriterPort } from '../../src/core/types.js';
import type { LogEntry, LogRecord } from '../../src/log/record.js';

const CTX = 'ctx-dispatch';

/** One capsule's log: every append is folded at once, and wakes whoever waits for a change. */
class MemoryLog implements QueueView, WriterPort {
  readonly fold = new QueueFold();
  readonly records: LogRecord[] = [];
  readonly isOpen = true;
  private readonly waiters = new Set<() => void>();
  private offset = 0;

  append(_capsule: string, entry: LogEntry): Promise<{ offset: number; epoch: number }> {
    const record = { ...entry, offset: ++this.offset } as LogRecord;
    this.records.push(record);
    this.fold.apply(record);
    for (const w of [...this.waiters]) w();
    return Promise.resolve({ offset: record.offset, epoch: 1 });
  }

  /** Resolves once a record matches (already there, or appended later). */
  waitFor(match: (r: LogRecord) => boolean): Promise<LogRecord> {
    return new Promise((resolve) => {
      const check = (): boolean => {
        const hit = this.records.find(match);
        if (hit) resolve(hit);
        return hit !== undefined;
      };
      if (check()) return;
      const w = (): void => {
        if (check()) this.waiters.delete(w);
      };
      this.waiters.add(w);
    });
  }

  poll(): Promise<void> {
    return Promise.resolve();
  }

  changed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  through(): Promise<void> {
    return Promise.resolve();
  }

  queued(messageId: string, text: string): Promise<unknown> {
    return this.append('cap', {
      kind: 'submission',
      protocol: 'flue',
      owner: null,
      contextId: CTX,
      messageId,
      text,
      queued: true,
      receivedAt: Date.now(),
    });
  }

  status(taskId: string, state: string, id: string, final = false): Promise<unknown> {
    const data = { id: taskId, context_id: CTX, status: { state, message: 'inference turn 1' }, final };
    return this.append('cap', {
      kind: 'frame',
      event: 'status',
      upstreamId: id,
      data: JSON.stringify(data),
      receivedAt: Date.now(),
    });
  }

  sessionStarted(): Promise<unknown> {
    return this.append('cap', {
      kind: 'fact',
      fact: 'capsule-session-started',
      reason: 'test',
      receivedAt: Date.now(),
    });
  }
}

type Answer = (messageId: string) => SubmitOutcome;

/** The capsule as the dispatcher sees it: each submit answered by `answer`, every call kept. */
class StandInCapsule implements UpstreamPort {
  readonly url = 'http://capsule.invalid/';
  readonly submits: { messageId: string; runningThen: number }[] = [];
  private readonly arrivals = new Set<() => void>();

  constructor(
    private readonly log: MemoryLog,
    public answer: Answer,
  ) {}

  state(): ReturnType<UpstreamPort['state']> {
    return { state: 'connected', lastFrameAt: null, reconnects: 0, ack: null };
  }

  submit(request: { messageId: string }): Promise<SubmitOutcome> {
    this.submits.push({ messageId: request.messageId, runningThen: this.log.fold.running.size });
    for (const a of [...this.arrivals]) a();
    return Promise.resolve(this.answer(request.messageId));
  }

  /** Resolves when the capsule has been handed `n` messages in all. */
  handed(n: number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.submits.length < n) return;
        this.arrivals.delete(check);
        resolve();
      };
      this.arrivals.add(check);
      check();
    });
  }

  cancel(): ReturnType<UpstreamPort['cancel']> {
    return Promise.resolve({ kind: 'canceled', body: '{}' });
  }

  forward(): ReturnType<UpstreamPort['forward']> {
    return Promise.reject(new Error('not used'));
  }
}

const accepted =
  (taskOf: (messageId: string) => string): Answer =>
  (messageId) => ({ kind: 'accepted', taskId: taskOf(messageId), contextId: CTX });
const REJECTED: SubmitOutcome = {
  kind: 'rejected',
  frame: { id: '0', data: '{"status":{"state":"rejected"}}' },
};

let dispatcher: Dispatcher | undefined;
afterEach(() => dispatcher?.stop());

const start = (log: MemoryLog, capsule: StandInCapsule): void => {
  dispatcher = new Dispatcher('cap', log, capsule, log, {
    storeTimeoutMs: 1_000,
    current: () => Promise.resolve(log.fold),
    orphanGraceMs: 0,
    retryMs: 10,
  });
  dispatcher.start();
};

const returned = (messageId: string) => (r: LogRecord) =>
  r.kind === 'fact' && r.fact === 'submission-returned' && r.messageId === messageId;

describe('dispatcher: what the capsule takes while a task runs', () => {
  it('hands a message over while a task another client started runs (a `queue` capsule takes it)', async () => {
    const log = new MemoryLog();
    const capsule = new StandInCapsule(
      log,
      accepted(() => 'tsk_ours'),
    );
    await log.status('tsk_foreign', 'working', '0');
    start(log, capsule);
    await log.queued('m-1', 'hello');
    await capsule.handed(1);
    expect(capsule.submits).toEqual([{ messageId: 'm-1', runningThen: 1 }]);
    await log.waitFor((r) => r.kind === 'fact' && r.fact === 'submission-started');
  });

  it('after a `rejected`, waits for the running task to end, then hands the message over again', async () => {
    const log = new MemoryLog();
    const capsule = new StandInCapsule(log, () => REJECTED);
    await log.status('tsk_foreign', 'working', '0');
    start(log, capsule);
    await log.queued('m-1', 'hello');
    await log.waitFor(returned('m-1'));
    expect(capsule.submits).toHaveLength(1);
    // The task goes on (frames keep coming, each a wake-up), well past the retry delay: no second try.
    for (let i = 1; i <= 5; i++) {
      await log.status('tsk_foreign', 'working', String(i));
      await log.changed(30);
    }
    expect(capsule.submits).toHaveLength(1);
    capsule.answer = accepted(() => 'tsk_ours');
    await log.status('tsk_foreign', 'completed', '6', true);
    await capsule.handed(2);
    expect(capsule.submits[1]).toEqual({ messageId: 'm-1', runningThen: 0 });
  });

  it('learns again after a new capsule session: a restarted capsule may take messages while busy', async () => {
    const log = new MemoryLog();
    const capsule = new StandInCapsule(log, () => REJECTED);
    await log.status('tsk_old', 'working', '0');
    start(log, capsule);
    await log.queued('m-1', 'hello');
    await log.waitFor(returned('m-1'));
    // Restarted (now in `queue` mode) and busy with a task of its new session at once.
    capsule.answer = accepted(() => 'tsk_ours');
    // Both folded before the dispatcher runs again (each append folds at once).
    void log.sessionStarted();
    await log.status('tsk_new', 'working', '0');
    await capsule.handed(2);
    expect(capsule.submits[1]).toEqual({ messageId: 'm-1', runningThen: 1 });
  });
});
