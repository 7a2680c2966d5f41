/**
 * A capsule's submission queue as the log says it is: fold every record in offset order. Queued
 * submissions (`queued: true`) wait in admission order until a `submission-handed` fact; a handed
 * one is in flight until its task's first frame, then running until the task's final status (or a
 * new capsule session). `submission-returned` puts a handed one back in its place; a withdrawn one
 * (or one whose record became durable too late, `submission-failed`) never runs. Pure: no I/O.
 */
import { viewFrame } from '../log/frame-view.js';
import type { LogRecord } from '../log/record.js';

export interface QueuedSubmission {
  messageId: string;
  contextId: string;
  owner: string | null;
  text: string;
  /** Admission: its record's offset (the queue's order) and receive time. */
  offset: number;
  receivedAt: number;
  /** The surface it was admitted through (the latency metrics' label). */
  surface: string;
  /** The W3C traceparent of its admission, when traced: its hand-off continues that trace. */
  trace: string | null;
}

export interface HandedSubmission extends QueuedSubmission {
  /** Offset of its `submission-handed` fact: its task's frames come after it. */
  handedAt: number;
  /** The capsule task it became, once its first frame is in the log. */
  taskId: string | null;
  /** Withdrawn after it was handed: its task is to be canceled. */
  withdrawn: boolean;
  /** Its task's first frame has been folded (the time-to-first-frame is known). */
  firstFrame: boolean;
}

const FINAL = new Set(['completed', 'failed', 'canceled', 'rejected']);

export class QueueFold {
  /** Waiting, oldest admission first. */
  readonly queue: QueuedSubmission[] = [];
  /** Handed over, not ended yet (in flight or running), by messageId. */
  readonly handed = new Map<string, HandedSubmission>();
  /** Tasks the log shows running (any task of the capsule, ours or not). */
  readonly running = new Set<string>();
  /** The capsule answered a hand-off with "accepts no tasks" (until its next session). */
  acceptsNone = false;
  /** The log's last word on the owner's watch: lost (until it connects again). */
  upstreamLost = false;
  /** Offset of the last record folded. */
  through = 0;
  /** How many `capsule-session-started` facts were folded: a new session may run another config. */
  sessions = 0;
  private readonly ended = new Set<string>();
  /** Told once per hand-off when its task's first frame is folded (the owner's latency metrics). */
  onFirstFrame: ((h: HandedSubmission, frame: LogRecord) => void) | null = null;

  apply(record: LogRecord): void {
    this.through = record.offset;
    if (record.kind === 'submission') {
      if (record.queued)
        this.queue.push({
          messageId: record.messageId,
          contextId: record.contextId,
          owner: record.owner,
          text: record.text,
          offset: record.offset,
          receivedAt: record.receivedAt,
          surface: record.protocol,
          trace: record.trace ?? null,
        });
      return;
    }
    if (record.kind === 'fact') return this.fact(record);
    // Only status frames start (id 0, `working`) or end a task: skip the parse of everything else.
    if (record.event !== 'status') return;
    const view = viewFrame(record);
    if (!view?.taskId || view.state === null) return;
    const taskId = view.taskId;
    if (FINAL.has(view.state) && !(view.state === 'failed' && view.message === 'input-timeout')) {
      this.running.delete(taskId);
      this.ended.add(taskId);
      for (const [id, h] of this.handed) if (h.taskId === taskId) this.handed.delete(id);
      return;
    }
    if (this.ended.has(taskId)) {
      // A reopened attempt (on-task-end hook) runs again under the same id.
      if (record.upstreamId !== '0') return;
      this.ended.delete(taskId);
    }
    this.running.add(taskId);
    // The first frame of the task our in-flight hand-off started (one capsule runs one at a time):
    // its task's, when the capsule's answer named it already, else an id-0 start in its context.
    for (const h of this.handed.values()) {
      if (h.firstFrame || record.offset <= h.handedAt) continue;
      const ours =
        h.taskId === taskId ||
        (h.taskId === null && record.upstreamId === '0' && view.contextId === h.contextId);
      if (!ours) continue;
      h.taskId = taskId;
      h.firstFrame = true;
      this.onFirstFrame?.(h, record);
      break;
    }
  }

  private fact(record: LogRecord & { kind: 'fact' }): void {
    switch (record.fact) {
      case 'upstream-lost':
        this.upstreamLost = true;
        return;
      case 'upstream-connected':
        this.upstreamLost = false;
        return;
      case 'capsule-session-started':
        // The old session's tasks are gone (their submissions settle failed on every surface).
        this.running.clear();
        this.sessions++;
        for (const [id, h] of this.handed) if (h.taskId !== null) this.handed.delete(id);
        this.acceptsNone = false;
        return;
      case 'submission-failed':
      case 'submission-withdrawn': {
        const i = this.queue.findIndex((q) => q.messageId === record.messageId);
        if (i >= 0) this.queue.splice(i, 1);
        const h = this.handed.get(record.messageId);
        if (h && record.fact === 'submission-withdrawn') {
          if (h.taskId === null && record.outcome === 'failed') this.handed.delete(record.messageId);
          else h.withdrawn = true;
        }
        if (record.fact === 'submission-withdrawn' && record.reason === NO_TASKS) this.acceptsNone = true;
        return;
      }
      case 'submission-handed': {
        const i = this.queue.findIndex((q) => q.messageId === record.messageId);
        if (i < 0) return; // withdrawn before its hand-off was recorded: it is never sent
        const [q] = this.queue.splice(i, 1);
        this.handed.set(record.messageId, {
          ...q!,
          handedAt: record.offset,
          taskId: null,
          withdrawn: false,
          firstFrame: false,
        });
        return;
      }
      case 'submission-started': {
        const h = this.handed.get(record.messageId);
        if (h && h.taskId === null && !this.ended.has(record.taskId)) {
          h.taskId = record.taskId;
          // Its first frame was folded before anything linked it (an id other than 0): not timed.
          if (this.running.has(record.taskId)) h.firstFrame = true;
        }
        return;
      }
      case 'submission-returned': {
        const h = this.handed.get(record.messageId);
        if (!h || h.taskId !== null) return;
        this.handed.delete(record.messageId);
        if (h.withdrawn) return;
        const { handedAt: _a, taskId: _t, withdrawn: _w, firstFrame: _f, ...q } = h;
        const at = this.queue.findIndex((o) => o.offset > q.offset);
        this.queue.splice(at < 0 ? this.queue.length : at, 0, q);
        return;
      }
      default:
        return;
    }
  }

  /** The capsule is taken: a task runs, or a hand-off has not ended. */
  get busy(): boolean {
    return this.running.size > 0 || this.handed.size > 0;
  }

  depth(): number {
    return this.queue.length;
  }

  depthOf(owner: string): number {
    let n = 0;
    for (const q of this.queue) if (q.owner === owner) n++;
    return n;
  }

  oldestMs(now: number): number {
    const first = this.queue[0];
    return first ? Math.max(0, now - first.receivedAt) : 0;
  }

  /** One queued or handed-but-unended submission, by id (what a cancel of one task settles). */
  pending(messageId: string): { contextId: string } | null {
    const h = this.handed.get(messageId);
    if (h && !h.withdrawn) return h;
    return this.queue.find((q) => q.messageId === messageId) ?? null;
  }

  /** Queued and handed-but-unended submissions of one context (what an abort settles). */
  ofContext(contextId: string): string[] {
    return [
      ...[...this.handed.values()].filter((h) => h.contextId === contextId && !h.withdrawn),
      ...this.queue.filter((q) => q.contextId === contextId),
    ].map((s) => s.messageId);
  }
}

/** The withdrawal reason of a capsule with `task_acceptance: none`; later admissions are refused. */
export const NO_TASKS = 'capsule accepts no tasks';
