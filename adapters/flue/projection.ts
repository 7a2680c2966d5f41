/**
 * Pure projection of one capsule log into one Flue conversation's update chunks (table in
 * docs/surfaces/flue.md). Feed every record of the capsule log in offset order; records of other contexts
 * project to nothing. No I/O: reading the log and serving HTTP are conversation-reader.ts / routes.ts.
 */
import { clientContext } from '../../src/auth/namespace.js';
import { ContextTracker, viewFrame } from '../../src/log/frame-view.js';
import { receivedIso as iso, type LogRecord, type SubmissionEntry } from '../../src/log/record.js';
import type { ChunkBody, FlueChunk, FlueSnapshot, SettlementOutcome } from './chunks.js';
import { formatOffset } from './codec.js';
import { INPUT_PART } from './constants.js';
import { applyChunk, emptyState, type ConversationState } from './snapshot.js';
import { messageMetaOf, messageOf, settlementMetaOf } from './surface-records.js';

export { messageMetaOf, type MessageMeta, type SettlementMeta } from './surface-records.js';

interface TaskState {
  messageId: string;
  submissionId: string | null;
  open: boolean;
  prompt: string | null;
}

/** Folds a capsule log into one conversation; `project` returns each record's chunks. */
export class ConversationProjector {
  state: ConversationState;
  /** Offset of the first admitted Flue message of this context (0 = not created yet). */
  createdAt = 0;
  /** The context the last projected record was attributed to (the live feed learns tasks from it). */
  lastContext: string | null = null;
  private tracker = new ContextTracker();
  /** Admitted submissions still waiting for their task, oldest first (capsules run tasks in order). */
  private pending: string[] = [];
  private tasks = new Map<string, TaskState>();
  /** Tasks of this context that began before the conversation existed: not part of it. */
  private foreign = new Set<string>();
  private settled = new Set<string>();
  private toolIds = new Set<string>();
  /** Tool calls announced by `tool-call-started` (0.6+) whose artifact is still to come: task+call → id. */
  private openTools = new Map<string, string>();
  /** A2A messageId → submissionId of this conversation's admitted messages (for submission-failed). */
  private bySubmissionMessage = new Map<string, string>();

  /** The id the client knows the conversation by (every chunk carries it: computed once). */
  private readonly clientId: string;

  constructor(
    readonly conversationId: string,
    readonly epoch: number,
  ) {
    this.clientId = clientContext(conversationId);
    this.state = emptyState(this.clientId);
  }

  /** An independent copy (snapshot caches hand out copies; projecting on one never touches another). */
  clone(): ConversationProjector {
    const copy = new ConversationProjector(this.conversationId, this.epoch);
    copy.state = structuredClone(this.state);
    copy.createdAt = this.createdAt;
    copy.tracker = this.tracker.clone();
    copy.pending = [...this.pending];
    copy.tasks = new Map([...this.tasks].map(([id, task]) => [id, { ...task }]));
    copy.foreign = new Set(this.foreign);
    copy.settled = new Set(this.settled);
    copy.toolIds = new Set(this.toolIds);
    copy.openTools = new Map(this.openTools);
    copy.bySubmissionMessage = new Map(this.bySubmissionMessage);
    return copy;
  }

  get created(): boolean {
    return this.createdAt > 0;
  }

  /** The snapshot after the last projected record, stamped with `offset` (a log offset). */
  snapshot(offset: number): FlueSnapshot {
    return {
      v: 1,
      conversationId: this.clientId,
      offset: formatOffset(this.epoch, offset),
      messages: this.state.messages,
      settlements: this.state.settlements,
    };
  }

  /** Ids of tasks that started in this conversation and have not ended (for abort). */
  openTasks(): string[] {
    return [...this.tasks].filter(([, t]) => t.open).map(([id]) => id);
  }

  /** Whether the task was ever seen in this conversation. */
  knowsTask(taskId: string): boolean {
    return this.tasks.has(taskId);
  }

  /** Submissions admitted but not yet matched to a task nor settled (for abort). */
  pendingSubmissions(): readonly string[] {
    return this.pending;
  }

  /** Project one record (in offset order) and apply its chunks to `state`. */
  project(record: LogRecord): FlueChunk[] {
    this.lastContext = null;
    if (record.kind === 'fact' && record.fact === 'submission-failed') return this.forget(record);
    if (record.kind === 'fact' && record.fact === 'submission-withdrawn') return this.withdrawn(record);
    const context = this.tracker.contextOf(record);
    this.lastContext = context;
    let bodies: ChunkBody[] = [];
    if (record.kind === 'fact') {
      if (record.fact === 'capsule-session-started') bodies = this.loseOpenTasks(record.receivedAt);
    } else if (context === this.conversationId) {
      bodies = record.kind === 'submission' ? this.submission(record) : this.frame(record);
    }
    const chunks = this.apply(bodies, record.offset);
    return this.createdAt === record.offset ? this.reset(record.offset) : chunks;
  }

  /** Make one record's bodies its chunks and apply them to `state`. */
  private apply(bodies: ChunkBody[], offset: number): FlueChunk[] {
    // Each body is made for this call: it becomes its chunk (same keys, same order as a spread). A
    // spread of a dozen body shapes went through V8's generic clone, and `map` made a holey array
    // that JSON.stringify serialises on its slow path: both showed in a busy capsule's profile.
    const chunks: FlueChunk[] = [];
    for (let index = 0; index < bodies.length; index++) {
      const chunk = bodies[index] as FlueChunk;
      chunk.conversationId = this.clientId;
      chunk.position = { batch: offset, index };
      chunks.push(chunk);
    }
    for (const chunk of chunks) applyChunk(this.state, chunk);
    return chunks;
  }

  /**
   * A submission whose record became durable only after its client was told it failed (the store
   * was down): it was never forwarded, so it must not wait for (and steal) the next task, and the
   * transcript drops its message. A reset is the one chunk that can take a message back out.
   */
  private forget(record: { messageId: string; offset: number }): FlueChunk[] {
    const submissionId = this.bySubmissionMessage.get(record.messageId);
    if (submissionId === undefined) return [];
    this.bySubmissionMessage.delete(record.messageId);
    const i = this.pending.indexOf(submissionId);
    if (i >= 0) this.pending.splice(i, 1);
    this.state.messages = this.state.messages.filter((m) => m.id !== record.messageId);
    return this.reset(record.offset);
  }

  /**
   * Taken out of the submission queue (abort, or it could not run): settled with its outcome. A
   * queued one leaves the waiting list, so the next task's frames are never taken for its reply.
   */
  private withdrawn(record: LogRecord & { kind: 'fact'; fact: 'submission-withdrawn' }): FlueChunk[] {
    if (record.contextId !== this.conversationId) return [];
    const submissionId = this.bySubmissionMessage.get(record.messageId);
    if (submissionId === undefined) return [];
    const i = this.pending.indexOf(submissionId);
    if (i >= 0) this.pending.splice(i, 1);
    return this.apply(
      this.settle(submissionId, record.outcome, { message: record.reason }, record.receivedAt),
      record.offset,
    );
  }

  /** §conversation-reset: creation is a structural boundary; the reset subsumes its batch. */
  private reset(offset: number): FlueChunk[] {
    const snapshot = structuredClone(this.snapshot(offset));
    return [
      {
        type: 'conversation-reset',
        conversationId: this.clientId,
        snapshot,
        position: { batch: offset, index: 0 },
      },
    ];
  }

  private submission(record: SubmissionEntry & { offset: number }): ChunkBody[] {
    const message = messageMetaOf(record);
    if (message) {
      if (!this.created) this.createdAt = record.offset;
      this.pending.push(message.submissionId);
      this.bySubmissionMessage.set(record.messageId, message.submissionId);
      return [{ type: 'message-appended', message: messageOf(message, record.messageId) }];
    }
    const settlement = settlementMetaOf(record);
    if (!settlement || !this.created) return [];
    const i = this.pending.indexOf(settlement.submissionId);
    if (i >= 0) this.pending.splice(i, 1);
    return this.settle(settlement.submissionId, settlement.outcome, settlement.error, record.receivedAt);
  }

  private settle(
    submissionId: string | null,
    outcome: SettlementOutcome,
    error: unknown,
    at: number,
  ): ChunkBody[] {
    if (!submissionId || this.settled.has(submissionId)) return [];
    this.settled.add(submissionId);
    return [
      {
        type: 'submission-settled',
        submissionId,
        outcome,
        ...(error === undefined ? {} : { error }),
        timestamp: iso(at),
      },
    ];
  }

  private frame(record: LogRecord): ChunkBody[] {
    const view = viewFrame(record);
    if (!view?.taskId || record.kind !== 'frame') return [];
    const taskId = view.taskId;
    if (!this.created) {
      this.foreign.add(taskId);
      return [];
    }
    if (this.foreign.has(taskId)) return [];
    const at = iso(record.receivedAt);
    const out: ChunkBody[] = [];
    let task = this.tasks.get(taskId);
    if (!task) {
      // A task's first frame opens the assistant message of the oldest waiting submission.
      const submissionId = this.pending.shift() ?? null;
      task = { messageId: `asst_${submissionId ?? taskId}`, submissionId, open: true, prompt: null };
      this.tasks.set(taskId, task);
      out.push({
        type: 'message-started',
        messageId: task.messageId,
        ...(submissionId ? { submissionId } : {}),
        timestamp: at,
      });
    }
    const messageId = task.messageId;
    const input = (state: string): ChunkBody => ({
      type: 'data-part',
      messageId,
      name: INPUT_PART,
      data: { prompt: task.prompt, state },
    });
    switch (view.event) {
      case 'status': {
        const state = view.state;
        if (state === 'working' && view.reopen !== null) {
          // 0.5+: an on-task-end hook reopened the task instead of ending it: this attempt's message
          // is complete and the next attempt answers in a message of its own; the submission
          // settles at the task's one final status.
          out.push({ type: 'message-completed', messageId, timestamp: at });
          task.messageId = `${messageId.replace(/~r\d+$/, '')}~r${view.reopen}`;
          task.open = true;
          out.push({
            type: 'message-started',
            messageId: task.messageId,
            ...(task.submissionId ? { submissionId: task.submissionId } : {}),
            timestamp: at,
          });
        } else if (state === 'working') {
          task.open = true;
          if (view.message === 'resumed' && task.prompt !== null) out.push(input('answered'));
        } else if (state === 'input-required') {
          task.prompt = view.message ?? '';
          out.push(input('waiting'));
        } else if (state === 'failed' && view.message === 'input-timeout') {
          // Not an end: the tool fails and the task goes on to its own final status (Murmur §status).
          out.push(input('timeout'));
        } else if (
          state === 'completed' ||
          state === 'failed' ||
          state === 'canceled' ||
          state === 'rejected'
        ) {
          task.open = false;
          out.push({ type: 'message-completed', messageId, timestamp: at });
          const outcome: SettlementOutcome =
            state === 'completed' ? 'completed' : state === 'canceled' ? 'aborted' : 'failed';
          const error = outcome === 'completed' ? undefined : { message: view.message ?? state };
          out.push(...this.settle(task.submissionId, outcome, error, record.receivedAt));
        }
        return out;
      }
      case 'text':
      case 'thinking': {
        // Chunks stream; a `text` final:true with text is the whole reply when no chunk came.
        if (view.text) {
          task.open = true;
          out.push({
            type: 'message-delta',
            messageId,
            kind: view.event === 'text' ? 'text' : 'reasoning',
            delta: view.text,
          });
        }
        return out;
      }
      case 'tool-call-started': {
        // 0.6+: the call shows as input-available while it runs; its artifact brings the output.
        const call = view.toolCall;
        if (!call) return out;
        const toolCallId = this.toolCallId(call.toolCallId, taskId, record.offset);
        this.openTools.set(`${taskId}\u0000${call.toolCallId}`, toolCallId);
        task.open = true;
        out.push({
          type: 'tool-input',
          messageId,
          toolCallId,
          toolName: call.toolName ?? 'tool',
          input: null,
          timestamp: at,
        });
        return out;
      }
      case 'artifact': {
        const a = view.artifact;
        if (!a) return out;
        const given = typeof a.tool_call_id === 'string' && a.tool_call_id ? a.tool_call_id : null;
        const key = given ? `${taskId}\u0000${given}` : null;
        const started = key ? this.openTools.get(key) : undefined;
        if (key) this.openTools.delete(key);
        const toolCallId = started ?? this.toolCallId(given, taskId, record.offset);
        const durationMs = typeof a.duration_ms === 'number' ? { durationMs: a.duration_ms } : {};
        if (!started) {
          out.push({
            type: 'tool-input',
            messageId,
            toolCallId,
            toolName: a.tool_name,
            input: null,
            timestamp: at,
          });
        }
        out.push(
          a.is_error
            ? { type: 'tool-output-error', toolCallId, errorText: a.content, ...durationMs, timestamp: at }
            : { type: 'tool-output', toolCallId, output: a.content, ...durationMs, timestamp: at },
        );
        return out;
      }
      default:
        return out;
    }
  }

  /** The capsule's call id unless this conversation already used it (then one unique to the record). */
  private toolCallId(given: string | null, taskId: string, offset: number): string {
    const id = given && !this.toolIds.has(given) ? given : `${taskId}:${offset}`;
    this.toolIds.add(id);
    return id;
  }

  /** A new capsule session: tasks of the old one are gone and will never write a final status. */
  private loseOpenTasks(at: number): ChunkBody[] {
    const out: ChunkBody[] = [];
    for (const task of this.tasks.values()) {
      if (!task.open) continue;
      task.open = false;
      out.push({ type: 'message-completed', messageId: task.messageId, timestamp: iso(at) });
      out.push(...this.settle(task.submissionId, 'failed', { message: 'capsule restarted: task lost' }, at));
    }
    return out;
  }
}
