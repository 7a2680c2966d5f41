/**
 * Pure projection of a capsule log into one chat (docs/surfaces/ai-sdk.md): every message sent to
 * the capsule in the chat's context is a turn (turn.ts), and each turn is the user message plus the
 * UI message stream of its assistant reply, from `start` to `finish`; a task's frames become its
 * turn's chunks in frame-chunks.ts. Feed the context's records in offset order (`readContext`, then
 * a subscription); records of other contexts project to nothing. The same records always give the
 * same chunks, so a replay after a cut or a reload rebuilds the same message.
 */
import { ContextTracker, viewFrame } from '../../src/log/frame-view.js';
import type { LogRecord, SubmissionEntry } from '../../src/log/record.js';
import { DATA_PART, type UiMessage } from './chunks.js';
import { frameChunks } from './frame-chunks.js';
import { aiSdkMeta } from './records.js';
import { closeParts, emit, failTurn, newTurn, stopTurn, type Turn } from './turn.js';

/** Folds one chat's records into its turns. */
export class ChatProjector {
  readonly turns: Turn[] = [];
  private readonly bySubmission = new Map<string, Turn>();
  private readonly byTask = new Map<string, Turn>();
  /** Turns whose task has not started, oldest first (a capsule runs a context's messages in order). */
  private readonly pending: Turn[] = [];
  private readonly tracker = new ContextTracker();
  /** The log offset this projection is complete through. */
  through = 0;

  constructor(readonly contextId: string) {}

  /** The turn a client's `start` named, if the chat has it. */
  turnOf(assistantId: string): Turn | undefined {
    return this.turns.find((t) => t.assistantId === assistantId);
  }

  hasUserMessage(id: string): boolean {
    return this.turns.some((t) => t.userMessage.id === id);
  }

  /** The oldest turn not finished (the one a resuming client follows), if any. */
  activeTurn(): Turn | undefined {
    return this.turns.find((t) => !t.finished);
  }

  /** Tasks of this chat still running (for stop). */
  runningTasks(): string[] {
    return this.turns.filter((t) => !t.finished && t.taskId !== null).map((t) => t.taskId!);
  }

  /**
   * The chat as `UIMessage[]`: each turn's user message, then its assistant message (from `start`
   * on, as a client holds it). A step with nothing in it yet is left out: the client shows a
   * `step-start` only once something follows it.
   */
  messages(): UiMessage[] {
    const out: UiMessage[] = [];
    for (const t of this.turns) {
      out.push(t.userMessage);
      let end = t.parts.length;
      while (end > 0 && t.parts[end - 1]!.type === 'step-start') end--;
      out.push({ id: t.assistantId, role: 'assistant', parts: t.parts.slice(0, end) });
    }
    return out;
  }

  /** Project one record (offsets increasing); `through` moves to it. */
  project(record: LogRecord): void {
    this.through = Math.max(this.through, record.offset);
    if (record.kind === 'fact') return this.fact(record);
    const context = this.tracker.contextOf(record);
    if (context !== this.contextId) return;
    if (record.kind === 'submission') return this.submission(record);
    const view = viewFrame(record);
    if (!view?.taskId) return;
    let turn = this.byTask.get(view.taskId);
    if (!turn) {
      // A task's first frame answers the oldest waiting message (the queue runs them in order).
      const next = this.pending[0];
      if (!next) return;
      this.bind(next, view.taskId);
      turn = next;
    }
    frameChunks(turn, view, record.offset);
  }

  private fact(record: LogRecord & { kind: 'fact' }): void {
    switch (record.fact) {
      case 'frames-possibly-missing':
        // Never a silent hole: every turn whose task may have written frames says where they may
        // be missing (one still waiting in the queue has written none).
        for (const t of this.turns) {
          if (t.finished || (t.taskId === null && !t.handed)) continue;
          // At its place: the text before the hole is one part, what follows another.
          closeParts(t);
          emit(t, {
            type: DATA_PART.loss,
            id: `loss-${record.offset}`,
            data: {
              reason: record.reason,
              offset: record.offset,
              ...(record.count !== undefined ? { count: record.count } : {}),
            },
          });
        }
        return;
      case 'capsule-session-started':
        // The capsule restarted: a running task will never write its final status.
        for (const t of [...this.byTask.values()])
          if (!t.finished) failTurn(t, 'capsule restarted: task lost');
        return;
      case 'submission-started': {
        if (record.contextId !== this.contextId) return;
        this.tracker.link(record.taskId, this.contextId);
        const turn = this.bySubmission.get(record.messageId);
        if (turn && turn.taskId === null && !this.byTask.has(record.taskId)) this.bind(turn, record.taskId);
        return;
      }
      case 'submission-handed': {
        const turn = this.bySubmission.get(record.messageId);
        if (turn) turn.handed = true;
        return;
      }
      case 'submission-returned': {
        const turn = this.bySubmission.get(record.messageId);
        if (!turn) return;
        turn.handed = false;
        if (turn.withdrawn && !turn.finished && turn.taskId === null) this.withdraw(turn, turn.withdrawn);
        return;
      }
      case 'submission-withdrawn': {
        if (record.contextId !== this.contextId) return;
        const turn = this.bySubmission.get(record.messageId);
        if (!turn || turn.finished || turn.taskId !== null) return;
        // A running one ends with its task's `canceled`; one handed over may be starting (its
        // frames are still to come), unless the withdrawal says its outcome is unknown (failed).
        if (turn.handed && record.outcome === 'aborted')
          turn.withdrawn = { outcome: record.outcome, reason: record.reason };
        else this.withdraw(turn, record);
        return;
      }
      case 'submission-failed': {
        const turn = this.bySubmission.get(record.messageId);
        if (!turn || turn.finished) return;
        this.unqueue(turn);
        failTurn(turn, `the message was not sent: ${record.reason}`);
        return;
      }
      default:
        return;
    }
  }

  private submission(record: SubmissionEntry & { offset: number }): void {
    const meta = aiSdkMeta(record);
    if (meta?.op === 'failed') {
      const turn = this.bySubmission.get(meta.inReplyTo);
      if (turn && !turn.finished) {
        this.unqueue(turn);
        failTurn(turn, meta.error);
      }
      return;
    }
    // Surface bookkeeping (settlements, outcomes, closes) is never queued; messages to the capsule
    // through any surface's queue are the chat's turns.
    if (!record.queued) return;
    const turn = newTurn(
      record.messageId,
      {
        id: meta?.op === 'message' ? meta.userMessageId : record.messageId,
        role: 'user',
        parts: [{ type: 'text', text: record.text }],
      },
      meta?.op === 'message' ? meta.assistantMessageId : `asst-${record.messageId}`,
    );
    this.turns.push(turn);
    this.pending.push(turn);
    this.bySubmission.set(record.messageId, turn);
  }

  /** A turn withdrawn before its task started: it never runs. */
  private withdraw(turn: Turn, w: { outcome: 'aborted' | 'failed'; reason: string }): void {
    this.unqueue(turn);
    if (w.outcome === 'aborted') stopTurn(turn, w.reason);
    else failTurn(turn, w.reason);
  }

  private bind(turn: Turn, taskId: string): void {
    turn.taskId = taskId;
    this.byTask.set(taskId, turn);
    this.unqueue(turn);
  }

  private unqueue(turn: Turn): void {
    const i = this.pending.indexOf(turn);
    if (i >= 0) this.pending.splice(i, 1);
  }
}
