/**
 * One capsule process lifetime (a "session"): its replay buffer, chunk and queued-cancel counters
 * and task runner. restart() replaces the whole object, which is how every counter and the buffer
 * reset together (murmur-upstream.md: "a restarted capsule has an empty buffer and counters reset").
 */
import { randomBytes } from 'node:crypto';
import { CHUNK_COUNTER_START, Counter, QUEUED_CANCEL_COUNTER_START } from './ids.js';
import { ReplayBuffer } from './replay-buffer.js';
import { TaskRunner, type Acceptance } from './tasks.js';
import type { Frame } from './frames.js';

export interface SessionOptions {
  bufferSize: number;
  acceptance: Acceptance;
  frameDelayMs: number;
}

export class Session {
  /** `ses_` + 32 hex, as `mur run --json` prints it and the agent card reports it. */
  readonly id = `ses_${randomBytes(16).toString('hex')}`;
  readonly buffer: ReplayBuffer;
  readonly chunk = new Counter(CHUNK_COUNTER_START);
  readonly queuedCancel = new Counter(QUEUED_CANCEL_COUNTER_START);
  readonly runner: TaskRunner;
  private alive = true;

  constructor(
    readonly number: number,
    opts: SessionOptions,
    broadcast: (frame: Frame, session: Session) => void,
  ) {
    this.buffer = new ReplayBuffer(opts.bufferSize);
    this.runner = new TaskRunner({
      acceptance: opts.acceptance,
      frameDelayMs: opts.frameDelayMs,
      chunk: this.chunk,
      queuedCancel: this.queuedCancel,
      write: (frame) => {
        if (!this.alive) return;
        // Every broadcast frame carries an id; all of them enter the shared replay buffer.
        this.buffer.push(frame);
        broadcast(frame, this);
      },
    });
  }

  /** The process exits: tasks are lost and nothing more is written. */
  end(): void {
    this.alive = false;
    this.runner.shutdown();
  }
}
