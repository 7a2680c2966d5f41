/**
 * One capsule process lifetime (a "session"): its replay buffer, chunk and queued-cancel counters
 * and task runner. restart() replaces the whole object, which is how every counter and the buffer
 * reset together (the Murmur protocol's "Replay" and "Event ids": buffer and counters belong to one session).
 */
import { randomBytes } from 'node:crypto';
import { CHUNK_COUNTER_START, Counter, QUEUED_CANCEL_COUNTER_START } from './ids.js';
import { ReplayBuffer } from './replay-buffer.js';
import { TaskRunner, type Acceptance, type ClosedQueueEntry } from './tasks.js';
import type { Frame } from './frames.js';
import type { LineRules } from './release-line.js';
import { SequenceIds, sequenceReplay, withId } from './sequence-ids.js';

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
  /** 0.4+: the session's one id sequence (unused on the spec's line). */
  readonly sequence = new SequenceIds();
  private alive = true;

  constructor(
    readonly number: number,
    opts: SessionOptions,
    readonly rules: LineRules,
    broadcast: (frame: Frame, session: Session) => void,
  ) {
    this.buffer = new ReplayBuffer(opts.bufferSize);
    this.runner = new TaskRunner({
      acceptance: opts.acceptance,
      frameDelayMs: opts.frameDelayMs,
      chunk: this.chunk,
      queuedCancel: this.queuedCancel,
      rules,
      write: (built) => {
        if (!this.alive) return;
        const frame = rules.sequenceIds ? withId(built, this.sequence.next()) : built;
        // Every broadcast frame carries an id; all of them enter the shared replay buffer.
        this.buffer.push(frame);
        broadcast(frame, this);
      },
    });
  }

  /** The replay for `Last-Event-ID: from` by this line's rule (gap, then frames, or frames). */
  replay(from: bigint): Frame[] {
    if (!this.rules.sequenceIds) return this.buffer.replay(from);
    return sequenceReplay(this.buffer.snapshot(), from, this.sequence.nextId);
  }

  /** The process exits: tasks are lost (0.5+: queued ones rejected, returned) and nothing more is written. */
  end(): ClosedQueueEntry[] {
    this.alive = false;
    return this.runner.shutdown();
  }
}
