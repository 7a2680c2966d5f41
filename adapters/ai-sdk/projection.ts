/**
 * Pure projection of a capsule log into one chat (docs/surfaces/ai-sdk.md): every message sent to
 * the capsule in the chat's context is a turn, and each turn is the user message plus the UI message
 * stream of its assistant reply, from `start` to `finish`. Feed the context's records in offset
 * order (`readContext`, then a subscription); records of other contexts project to nothing. The same
 * records always give the same chunks, so a replay after a cut or a reload rebuilds the same message.
 */
import { ContextTracker, viewFrame, type FrameView } from '../../src/log/frame-view.js';
import type { LogRecord, SubmissionEntry } from '../../src/log/record.js';
import {
  applyChunk,
  DATA_PART,
  type FinishReason,
  type UiChunk,
  type UiMessage,
  type UiPart,
} from './chunks.js';

/** What this surface records with its submissions (`meta.aiSdk`). */
export type AiSdkMeta =
  | { op: 'message'; userMessageId: string; assistantMessageId: string }
  /** A submission the capsule will never run (refused outright): ends its turn with the reason. */
  | { op: 'failed'; inReplyTo: string; error: string };

const aiSdkMeta = (record: SubmissionEntry): AiSdkMeta | null => {
  if (record.protocol !== 'ai-sdk') return null;
  const meta = record.meta?.aiSdk;
  return meta && typeof meta === 'object' ? (meta as AiSdkMeta) : null;
};

export interface Turn {
  /** The A2A messageId the capsule received (the submission record's). */
  submissionMessageId: string;
  userMessage: UiMessage;
  assistantId: string;
  /** The turn's stream so far, from its `start`. */
  chunks: UiChunk[];
  parts: UiPart[];
  taskId: string | null;
  finished: boolean;
  /** Parts opened and not yet ended, by stream-local id. */
  openText: string | null;
  openReasoning: string | null;
  openParts: Map<string, { state?: 'streaming' | 'done'; text: string }>;
  /** Tool calls announced (input available) and still without output: capsule id → stream id. */
  openTools: Map<string, string>;
  toolIds: Set<string>;
  wroteText: boolean;
  /** The inference turn the current step is (capsule `working` "inference turn N"). */
  step: number;
  /** Handed to the capsule by the queue (`submission-handed`), not returned since. */
  handed: boolean;
  /** Withdrawn while handed: it ends by its task's final status, or here if it comes back. */
  withdrawn: { outcome: 'aborted' | 'failed'; reason: string } | null;
}

const INFERENCE_TURN = /^inference turn (\d+)/;

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
    if (view?.taskId) this.frame(record, view, view.taskId);
  }

  private fact(record: LogRecord & { kind: 'fact' }): void {
    switch (record.fact) {
      case 'frames-possibly-missing':
        // Never a silent hole: every turn whose task may have written frames says where they may
        // be missing (one still waiting in the queue has written none).
        for (const t of this.turns) {
          if (t.finished || (t.taskId === null && !t.handed)) continue;
          // At its place: the text before the hole is one part, what follows another.
          this.closeParts(t);
          this.emit(t, {
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
          if (!t.finished) this.fail(t, 'capsule restarted: task lost');
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
        this.fail(turn, `the message was not sent: ${record.reason}`);
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
        this.fail(turn, meta.error);
      }
      return;
    }
    // Surface bookkeeping (settlements, outcomes, closes) is never queued; messages to the capsule
    // through any surface's queue are the chat's turns.
    if (!record.queued) return;
    const userId = meta?.op === 'message' ? meta.userMessageId : record.messageId;
    const turn: Turn = {
      submissionMessageId: record.messageId,
      userMessage: { id: userId, role: 'user', parts: [{ type: 'text', text: record.text }] },
      assistantId: meta?.op === 'message' ? meta.assistantMessageId : `asst-${record.messageId}`,
      chunks: [],
      parts: [],
      taskId: null,
      finished: false,
      openText: null,
      openReasoning: null,
      openParts: new Map(),
      openTools: new Map(),
      toolIds: new Set(),
      wroteText: false,
      step: 0,
      handed: false,
      withdrawn: null,
    };
    this.turns.push(turn);
    this.pending.push(turn);
    this.bySubmission.set(record.messageId, turn);
    this.emit(turn, { type: 'start', messageId: turn.assistantId });
  }

  /** A turn withdrawn before its task started: it never runs. */
  private withdraw(turn: Turn, w: { outcome: 'aborted' | 'failed'; reason: string }): void {
    this.unqueue(turn);
    if (w.outcome === 'aborted') this.stop(turn, w.reason);
    else this.fail(turn, w.reason);
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

  private frame(record: LogRecord, view: FrameView, taskId: string): void {
    let turn = this.byTask.get(taskId);
    if (!turn) {
      // A task's first frame answers the oldest waiting message (the queue runs them in order).
      const next = this.pending[0];
      if (!next) return;
      this.bind(next, taskId);
      turn = next;
    }
    if (turn.finished) return;
    if (turn.step === 0) this.startStep(turn, 1);
    const at = record.offset;
    switch (view.event) {
      case 'text': {
        if (!view.text) {
          if (view.final) this.closeText(turn); // end-of-turn marker
          return;
        }
        this.closeReasoning(turn);
        if (turn.openText === null) {
          turn.openText = `text-${at}`;
          this.emit(turn, { type: 'text-start', id: turn.openText });
        }
        this.emit(turn, { type: 'text-delta', id: turn.openText, delta: view.text });
        turn.wroteText = true;
        if (view.final) this.closeText(turn);
        return;
      }
      case 'thinking': {
        if (!view.text) return;
        this.closeText(turn);
        if (turn.openReasoning === null) {
          turn.openReasoning = `reasoning-${at}`;
          this.emit(turn, { type: 'reasoning-start', id: turn.openReasoning });
        }
        this.emit(turn, { type: 'reasoning-delta', id: turn.openReasoning, delta: view.text });
        return;
      }
      case 'tool-call-started': {
        // 0.6+: the call is announced before it runs; its artifact brings the output. The capsule
        // streams only the input's size, never its text, so the input is shown as unknown.
        const call = view.toolCall;
        if (!call) return;
        this.closeParts(turn);
        const id = this.toolCallId(turn, call.toolCallId, at);
        turn.openTools.set(call.toolCallId, id);
        this.emit(turn, this.toolInput(id, call.toolName ?? 'tool'));
        return;
      }
      case 'artifact':
        return this.artifact(turn, view, at);
      case 'status':
        return this.status(turn, view, at);
      default:
        return;
    }
  }

  private artifact(turn: Turn, view: FrameView, at: number): void {
    const a = view.artifact;
    if (!a) return;
    this.closeParts(turn);
    if (a.tool_call_id === null && a.fence_source === null && a.duration_ms === null) {
      // A hook's artifact, not a tool's output.
      this.emit(turn, {
        type: DATA_PART.artifact,
        id: `artifact-${at}`,
        data: { name: a.tool_name, content: a.content },
      });
      return;
    }
    const given = a.tool_call_id;
    let id = given !== null ? turn.openTools.get(given) : undefined;
    if (id === undefined) {
      // Lines before 0.6 announce nothing: the call and its output arrive together.
      id = this.toolCallId(turn, given, at);
      this.emit(turn, this.toolInput(id, a.tool_name));
    } else turn.openTools.delete(given!);
    this.emit(
      turn,
      a.is_error
        ? { type: 'tool-output-error', toolCallId: id, errorText: a.content, providerExecuted: true }
        : { type: 'tool-output-available', toolCallId: id, output: a.content, providerExecuted: true },
    );
  }

  private status(turn: Turn, view: FrameView, at: number): void {
    const message = view.message ?? '';
    switch (view.state) {
      case 'working': {
        // A new inference turn (or a reopened attempt, 0.5+) is a new step, once no tool call is
        // waiting for its output (the client looks a tool part up within its step).
        const n = INFERENCE_TURN.exec(message);
        const next = view.reopen !== null || (n !== null && Number(n[1]) !== turn.step);
        if (next && turn.openTools.size === 0) {
          this.closeParts(turn);
          this.emit(turn, { type: 'finish-step' });
          this.startStep(turn, n ? Number(n[1]) : turn.step + 1);
        }
        if (message === 'resumed')
          this.emit(turn, { type: DATA_PART.input, id: 'input', data: { state: 'answered' } });
        return;
      }
      case 'input-required':
        this.closeParts(turn);
        this.emit(turn, { type: DATA_PART.input, id: 'input', data: { prompt: message, state: 'waiting' } });
        return;
      case 'failed':
        if (message === 'input-timeout') {
          // Not the task's end: the waiting tool fails and the task goes on (Murmur §status).
          this.emit(turn, { type: DATA_PART.input, id: 'input', data: { state: 'timeout' } });
          return;
        }
        return this.fail(turn, message || 'the task failed');
      case 'completed':
        // A reply written only as the final status's response still shows as text.
        if (!turn.wroteText && view.response) {
          this.closeParts(turn);
          const id = `text-${at}`;
          this.emit(turn, { type: 'text-start', id });
          this.emit(turn, { type: 'text-delta', id, delta: view.response });
          this.emit(turn, { type: 'text-end', id });
        }
        return this.end(turn, 'stop');
      case 'canceled':
        return this.stop(turn, message || 'canceled');
      case 'rejected':
        return this.fail(turn, 'the capsule refused the message');
      default:
        return;
    }
  }

  private toolInput(toolCallId: string, toolName: string): UiChunk {
    return {
      type: 'tool-input-available',
      toolCallId,
      toolName,
      input: {},
      dynamic: true,
      providerExecuted: true,
    };
  }

  /** The capsule's call id unless this turn already used it (then one unique to the record). */
  private toolCallId(turn: Turn, given: string | null, at: number): string {
    const id = given !== null && !turn.toolIds.has(given) ? given : `call-${at}`;
    turn.toolIds.add(id);
    return id;
  }

  private startStep(turn: Turn, step: number): void {
    turn.step = step;
    this.emit(turn, { type: 'start-step' });
  }

  private closeText(turn: Turn): void {
    if (turn.openText === null) return;
    this.emit(turn, { type: 'text-end', id: turn.openText });
    turn.openText = null;
  }

  private closeReasoning(turn: Turn): void {
    if (turn.openReasoning === null) return;
    this.emit(turn, { type: 'reasoning-end', id: turn.openReasoning });
    turn.openReasoning = null;
  }

  private closeParts(turn: Turn): void {
    this.closeText(turn);
    this.closeReasoning(turn);
  }

  private end(turn: Turn, reason: FinishReason): void {
    this.closeParts(turn);
    if (turn.step > 0) this.emit(turn, { type: 'finish-step' });
    this.emit(turn, { type: 'finish', finishReason: reason });
    turn.finished = true;
  }

  /** The turn ends in an `error` chunk (the client's status becomes `error`, with this text). */
  private fail(turn: Turn, errorText: string): void {
    this.closeParts(turn);
    this.emit(turn, { type: 'error', errorText });
    this.end(turn, 'error');
  }

  /** Stopped (a stop request, a cancel): the reply so far stands. */
  private stop(turn: Turn, reason: string): void {
    this.closeParts(turn);
    this.emit(turn, { type: 'abort', reason });
    this.end(turn, 'other');
  }

  private emit(turn: Turn, chunk: UiChunk): void {
    turn.chunks.push(chunk);
    applyChunk(turn.parts, turn.openParts, chunk);
  }
}
