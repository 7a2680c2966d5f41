/**
 * Pure projection of a capsule's log records into one BeeOS channel's v3 envelopes (docs/surfaces/beeos.md).
 * Stateful per reader: feed every record from the channel's first record on, in offset order; the
 * cumulative `body`/`parts` of a reply are rebuilt from the log, never kept per client.
 */
import { receivedIso as iso, type LogRecord } from '../../src/log/record.js';
import { ContextTracker, viewFrame } from '../../src/log/frame-view.js';
import type { FrameView } from '../../src/log/frame-view.js';
import { OFFSET_SLOTS, SLOT_DELTA, SLOT_MAIN } from './constants.js';
import type { EndReason } from './constants.js';
import { projected, stableUuid } from './envelope.js';
import {
  JsonText,
  replyConstants,
  streamingReplyBytes,
  type ReplyConstants,
  type StreamingReply,
} from './reply-bytes.js';
import type {
  ChannelSpec,
  Envelope,
  EnvelopeState,
  Part,
  Projected,
  ProjectionStep,
  TaskStatus,
} from './envelope.js';
import { beeosMeta } from './records.js';
import { isOtherSurfaceBookkeeping, refusalOf } from './other-surface-records.js';
import {
  cancelEnvelope,
  NEVER_MADE_MESSAGE,
  neverMadeEnvelope,
  outcomeEnvelope,
} from './surface-envelopes.js';

export type {
  ChannelSpec,
  Envelope,
  EnvelopeState,
  Part,
  Projected,
  ProjectionStep,
  StopReason,
  TaskStatus,
} from './envelope.js';
export { stableUuid } from './envelope.js';

interface Reply {
  taskId: string;
  attempt: number;
  messageId: string;
  inReplyTo: string | undefined;
  body: string;
  /** The body's JSON escape as bytes, while it extends exactly (null: encode envelopes whole). */
  bodyJson: JsonText | null;
  /** Its streaming envelopes' fixed JSON, made with the first of them. */
  constants: ReplyConstants | null;
  parts: Part[];
  ended: boolean;
  createdAt: string;
}

/**
 * A reply's final status: no streaming envelope follows, so its body escape goes (a reply is kept
 * for the projector's life, and the escape's Buffer may be a slice holding a whole pool slab).
 */
const endReply = (r: Reply): void => {
  r.ended = true;
  r.bodyJson = null;
};

/** A streaming reply whose frame is written from the reply's kept body escape (reply-bytes.ts). */
class StreamingReplyProjected implements Projected {
  readonly delta = false;
  readonly offset: number;

  constructor(
    readonly envelope: Envelope,
    private readonly reply: StreamingReply,
  ) {
    this.offset = envelope.offset;
  }

  bytes(): Buffer {
    return streamingReplyBytes(this.reply);
  }
}

class LazyChunk implements Projected {
  readonly delta = true;
  private built: Envelope | null = null;

  constructor(
    readonly offset: number,
    private readonly type: string,
    private readonly contextId: string,
    private readonly taskId: string,
    private readonly recordOffset: number,
    private readonly inReplyTo: string | undefined,
    private readonly publisher: string,
    private readonly text: string,
    private readonly receivedAt: number,
  ) {}

  get envelope(): Envelope {
    if (this.built) return this.built;
    const at = iso(this.receivedAt);
    this.built = {
      type: this.type,
      message_id: stableUuid(this.contextId, this.taskId, 'chunk', this.recordOffset),
      offset: this.offset,
      ...(this.inReplyTo ? { in_reply_to: this.inReplyTo } : {}),
      publisher_id: this.publisher,
      state: 'completed',
      payload: { text: this.text },
      created_at: at,
      updated_at: at,
    };
    return this.built;
  }
}

export class ChannelProjector {
  private readonly tracker = new ContextTracker();
  private readonly replies = new Map<string, Reply>();
  private readonly attempts = new Map<string, number>();
  private readonly unpaired: string[] = [];
  private readonly replyTo = new Map<string, string | undefined>();
  /** Highest envelope offset of the channel so far (deltas included), or its creation slot. */
  latestOffset = 0;
  status: TaskStatus = 'queued';
  result: string | null = null;
  error: string | null = null;
  terminal = false;
  closed = false;
  /** A cancel was recorded: later non-final frames (ingested late) no longer make it `running`. */
  private cancelled = false;
  updatedAt: number | null = null;

  /** Digest of the in-context records projected so far (see shareKey). */
  private seen = 0;
  /** The capsule task ids the tracker attributes to this channel's context (mirrors its links). */
  private readonly ownTasks = new Set<string>();
  private readonly publisher: string;
  private h1 = 0x811c9dc5;
  private h2 = 0x01000193;

  /**
   * `replyBytes`: keep each reply's body escape so streaming replies encode without re-serialising
   * it (reply-bytes.ts): for projections whose envelopes are written to streams. A JSON read never
   * encodes them and does without the work.
   */
  constructor(
    private readonly spec: ChannelSpec,
    private readonly options: { replyBytes: boolean } = { replyBytes: true },
  ) {
    this.publisher = `agent:${spec.agentId}`;
    for (const id of spec.taskIds ?? []) this.link(id);
  }

  private link(taskId: string): void {
    this.tracker.link(taskId, this.spec.contextId);
    this.ownTasks.add(taskId);
  }

  /**
   * Identifies the projector's state: two projectors of one channel that have projected the same
   * in-context records (only those change the state) and attribute the same tasks to the context
   * (only those links decide what is in context next) project every later record identically, so
   * a reader may leave its own projector for a shared one (channel-feed.ts).
   */
  shareKey(): string {
    return `${[...this.ownTasks].sort().join(',')}.${this.seen}.${this.h1}.${this.h2}`;
  }

  /**
   * The tasks this projector takes as the channel's, the ones its spec named included: a context
   * read must bring their frames even before the log links them to the context.
   */
  linkedTasks(): string[] {
    return [...this.ownTasks];
  }

  /** Capsule task ids seen in the channel, in order of first appearance. */
  taskIds(): string[] {
    return [...this.attempts.keys()];
  }

  /** Project one record (any record of the capsule's log; others' records yield nothing). */
  project(record: LogRecord): ProjectionStep {
    const view = viewFrame(record);
    if (view?.taskId && view.contextId) {
      if (view.contextId === this.spec.contextId) this.ownTasks.add(view.taskId);
      else this.ownTasks.delete(view.taskId);
    }
    if (record.kind === 'fact' && record.fact === 'submission-failed') {
      // Facts name no context: this one belongs to the channel that holds the failed message.
      if (!this.unpaired.includes(record.messageId)) return { envelopes: [] };
    } else if (record.kind === 'fact' && record.fact === 'submission-withdrawn') {
      if (record.contextId !== this.spec.contextId) return { envelopes: [] };
    } else if (this.tracker.contextOf(record) !== this.spec.contextId) return { envelopes: [] };
    this.seen++;
    this.h1 = Math.imul(this.h1 ^ record.offset, 0x01000193) >>> 0;
    this.h2 = Math.imul(this.h2 ^ (record.receivedAt % 0x7fffffff), 0x5bd1e995) >>> 0;
    this.updatedAt = record.receivedAt;
    this.latestOffset = Math.max(this.latestOffset, record.offset * OFFSET_SLOTS);
    if (record.kind === 'fact' && record.fact === 'submission-failed') return this.neverMade(record);
    if (record.kind === 'fact' && record.fact === 'submission-withdrawn') return this.withdrawn(record);
    if (record.kind === 'submission') return this.submission(record);
    if (!view || !view.taskId) return { envelopes: [] };
    return this.frame(record, view, view.taskId);
  }

  private out(items: Projected[], end?: EndReason): ProjectionStep {
    for (const p of items) this.latestOffset = Math.max(this.latestOffset, p.offset);
    return end ? { envelopes: items, end } : { envelopes: items };
  }

  private submission(record: LogRecord & { kind: 'submission' }): ProjectionStep {
    const meta = beeosMeta(record);
    const at = iso(record.receivedAt);
    const base = { offset: record.offset * OFFSET_SLOTS + SLOT_MAIN, created_at: at, updated_at: at };
    const user = `user:${record.owner ?? 'anonymous'}`;
    if (meta?.op === 'conversation-open') return { envelopes: [] };
    if (meta?.op === 'close') {
      this.closed = true;
      const items: Projected[] = [];
      if (meta.reason === 'cancel') {
        this.cancelled = true;
        if (!this.terminal) this.status = 'canceled';
        items.push(projected(cancelEnvelope(base, record.messageId, user)));
      }
      return this.out(items, 'channel_closed');
    }
    if (meta?.op === 'outcome' && meta.outcome === 'accepted') {
      // The capsule task id a submission was accepted as (any replica wrote it): attribute its
      // frames to this channel even when the task's first frame is not in the log.
      if (meta.taskId) this.link(meta.taskId);
      return { envelopes: [] };
    }
    if (meta?.op === 'outcome') {
      // The capsule refused the submission (busy) or could not be reached: no task frames follow.
      const refused = meta.outcome === 'rejected' || meta.outcome === 'method-not-found';
      this.status = refused ? 'rejected' : 'failed';
      this.error = meta.message ?? null;
      const inReplyTo = meta.inReplyTo;
      const at = inReplyTo ? this.unpaired.indexOf(inReplyTo) : -1;
      if (at >= 0) this.unpaired.splice(at, 1);
      const envelope = outcomeEnvelope(base, record.messageId, meta, refused, this.spec.agentId);
      return this.finish([projected(envelope)]);
    }
    if (record.protocol !== 'beeos') {
      // Another surface's record in a shared context (an AI SDK chat, a Flue conversation).
      const refusal = refusalOf(record);
      if (refusal) return this.refusedElsewhere(record, refusal);
      if (isOtherSurfaceBookkeeping(record)) return { envelopes: [] };
    }
    // Any other submission in this context is a caller message (task, conversation turn, invoke,
    // a chat's message, a Flue message).
    this.unpaired.push(record.messageId);
    return this.out([
      projected({
        ...base,
        type: 'chat_message',
        message_id: record.messageId,
        publisher_id: user,
        state: 'completed',
        payload: { text: record.text },
      }),
    ]);
  }

  /**
   * A caller message whose record became durable only after its caller was told it failed (the
   * store was down): it was never sent to the agent. It answers no task (so it cannot take the next
   * reply's `in_reply_to`), and its stream says it failed, like an unreachable agent's outcome.
   */
  private neverMade(record: LogRecord & { kind: 'fact' } & { messageId: string }): ProjectionStep {
    this.unpaired.splice(this.unpaired.indexOf(record.messageId), 1);
    const envelope = neverMadeEnvelope(this.spec, record);
    this.status = 'failed';
    this.error = NEVER_MADE_MESSAGE;
    return this.finish([projected(envelope)]);
  }

  /**
   * A queued message taken out of the submission queue (docs/submission-queue.md). Aborted: by a
   * cancel or DELETE, whose close record already says so. Failed: it never ran (or its outcome is
   * unknown), and the channel says why, as for an unreachable agent.
   */
  private withdrawn(record: LogRecord & { kind: 'fact'; fact: 'submission-withdrawn' }): ProjectionStep {
    const at = this.unpaired.indexOf(record.messageId);
    if (at < 0) return { envelopes: [] };
    this.unpaired.splice(at, 1);
    if (record.outcome === 'aborted') {
      if (!this.terminal) this.status = 'canceled';
      return { envelopes: [] };
    }
    this.status = 'failed';
    this.error = record.reason;
    return this.finish([projected(neverMadeEnvelope(this.spec, record, record.reason))]);
  }

  /**
   * Another surface refused a message of the context outright (an AI SDK `failed` record, a Flue
   * failed settlement): it answers no task, and the channel says why, as for an unreachable agent.
   */
  private refusedElsewhere(
    record: LogRecord & { kind: 'submission' },
    refusal: { inReplyTo: string; error: string },
  ): ProjectionStep {
    const at = this.unpaired.indexOf(refusal.inReplyTo);
    if (at < 0) return { envelopes: [] };
    this.unpaired.splice(at, 1);
    this.status = 'failed';
    this.error = refusal.error;
    const refused = { offset: record.offset, receivedAt: record.receivedAt, messageId: refusal.inReplyTo };
    return this.finish([projected(neverMadeEnvelope(this.spec, refused, refusal.error))]);
  }

  /** A terminal envelope: tasks end here (BeeOS "Streaming" §3 `task_terminal`). */
  private finish(items: Projected[]): ProjectionStep {
    const first = !this.terminal;
    this.terminal = true;
    return this.out(items, this.spec.kind === 'task' && first ? 'task_terminal' : undefined);
  }

  private reply(taskId: string, receivedAt: number): Reply {
    const current = this.replies.get(taskId);
    if (current && !current.ended) return current;
    // A new reply: the task's first attempt, or a reopened attempt after a final status.
    const attempt = (this.attempts.get(taskId) ?? 0) + 1;
    this.attempts.set(taskId, attempt);
    if (!this.replyTo.has(taskId)) this.replyTo.set(taskId, this.unpaired.shift());
    const r: Reply = {
      taskId,
      attempt,
      messageId: stableUuid(this.spec.contextId, taskId, attempt),
      inReplyTo: this.replyTo.get(taskId),
      body: '',
      bodyJson: this.options.replyBytes ? new JsonText() : null,
      constants: null,
      parts: [],
      ended: false,
      createdAt: iso(receivedAt),
    };
    this.replies.set(taskId, r);
    return r;
  }

  private replyEnvelope(
    record: LogRecord,
    r: Reply,
    state: EnvelopeState,
    extra?: Partial<Envelope>,
  ): Projected {
    const envelope: Envelope = {
      type: 'agent_reply',
      message_id: r.messageId,
      offset: record.offset * OFFSET_SLOTS + SLOT_MAIN,
      ...(r.inReplyTo ? { in_reply_to: r.inReplyTo } : {}),
      publisher_id: this.publisher,
      state,
      body: r.body,
      parts: r.parts.length === 0 ? [] : r.parts.map((p) => ({ ...p })),
      created_at: r.createdAt,
      updated_at: iso(record.receivedAt),
    };
    // Assigned, not spread: the same keys in the same order, without a generic clone per record.
    if (extra) Object.assign(envelope, extra);
    if (extra || state !== 'streaming' || !r.bodyJson) return projected(envelope);
    r.constants ??= replyConstants(r.messageId, r.inReplyTo, envelope.publisher_id, r.createdAt);
    return new StreamingReplyProjected(envelope, {
      constants: r.constants,
      offset: envelope.offset,
      parts: envelope.parts!,
      updatedAt: envelope.updated_at,
      body: r.bodyJson.bytes(),
      bodyLength: r.bodyJson.length,
    });
  }

  /**
   * A legacy per-token chunk, built only when a reader shows deltas (include_deltas): its id is a
   * SHA-256 and its bytes a second encode per record, for envelopes most streams never write.
   * Everything it reads is taken now, so it is the same envelope whenever it is built.
   */
  private chunk(record: LogRecord, r: Reply, type: string, text: string): Projected {
    return new LazyChunk(
      record.offset * OFFSET_SLOTS + SLOT_DELTA,
      type,
      this.spec.contextId,
      r.taskId,
      record.offset,
      r.inReplyTo,
      this.publisher,
      text,
      record.receivedAt,
    );
  }

  private frame(record: LogRecord, view: FrameView, taskId: string): ProjectionStep {
    const r = this.reply(taskId, record.receivedAt);
    switch (view.event) {
      case 'text': {
        const text = view.text ?? '';
        if (text === '') return { envelopes: [] }; // end-of-turn marker: nothing changes
        r.body += text;
        if (r.bodyJson && !r.bodyJson.append(text)) r.bodyJson = null;
        const items = [this.replyEnvelope(record, r, 'streaming')];
        if (!view.final) items.push(this.chunk(record, r, 'agent_message_chunk', text));
        return this.out(items);
      }
      case 'thinking': {
        const text = view.text ?? '';
        const last = r.parts[r.parts.length - 1];
        if (last && last.type === 'thinking') last.text = `${String(last.text)}${text}`;
        else r.parts.push({ type: 'thinking', text });
        return this.out([
          this.replyEnvelope(record, r, 'streaming'),
          this.chunk(record, r, 'agent_reasoning', text),
        ]);
      }
      case 'artifact': {
        const a = view.artifact;
        if (!a) return { envelopes: [] };
        if (a.tool_call_id === null && a.fence_source === null && a.duration_ms === null) {
          r.parts.push({ type: 'custom', name: a.tool_name, content: a.content }); // hook artifact
        } else {
          // A 0.6+ capsule announced the call (tool-call-started): its tool_use part is there already.
          const announced =
            a.tool_call_id !== null && r.parts.some((p) => p.type === 'tool_use' && p.id === a.tool_call_id);
          if (!announced) r.parts.push({ type: 'tool_use', id: a.tool_call_id, name: a.tool_name });
          r.parts.push({
            type: 'tool_result',
            tool_use_id: a.tool_call_id,
            name: a.tool_name,
            content: a.content,
            is_error: a.is_error,
            exit_code: a.exit_code,
            duration_ms: a.duration_ms,
            truncated: a.truncated,
          });
        }
        return this.out([this.replyEnvelope(record, r, 'streaming')]);
      }
      case 'tool-call-started': {
        // 0.6+: the call shows as a tool_use part while it runs; its artifact adds the tool_result.
        const call = view.toolCall;
        if (!call) return { envelopes: [] };
        r.parts.push({ type: 'tool_use', id: call.toolCallId, name: call.toolName ?? 'tool' });
        return this.out([this.replyEnvelope(record, r, 'streaming')]);
      }
      case 'status':
        return this.statusFrame(record, view, r);
      default:
        return { envelopes: [] };
    }
  }

  private statusFrame(record: LogRecord, view: FrameView, r: Reply): ProjectionStep {
    const message = view.message ?? '';
    const payload = { task_state: view.state, message };
    switch (view.state) {
      case 'input-required': {
        this.running('input_required');
        const at = iso(record.receivedAt);
        const envelope: Envelope = {
          type: 'agent.input_required',
          message_id: stableUuid(this.spec.contextId, r.taskId, 'input', record.offset),
          offset: record.offset * OFFSET_SLOTS + SLOT_MAIN,
          ...(r.inReplyTo ? { in_reply_to: r.inReplyTo } : {}),
          publisher_id: this.publisher,
          state: 'completed',
          payload: { prompt: message, task_id: r.taskId },
          created_at: at,
          updated_at: at,
        };
        return this.out([projected(envelope)]);
      }
      case 'completed':
        endReply(r);
        this.status = 'completed';
        this.result = view.response ?? r.body;
        // v3: the terminal body is the capsule's status.response, not the streamed text.
        r.body = view.response ?? r.body;
        return this.finish([
          this.replyEnvelope(record, r, 'completed', { stop_reason: 'end_turn', payload }),
        ]);
      case 'failed':
        if (message === 'input-timeout') {
          // Not the task's end: the waiting tool fails and the task goes on (murmur spec `status`).
          this.running('running');
          return this.out([this.replyEnvelope(record, r, 'streaming', { payload })]);
        }
        endReply(r);
        this.status = 'failed';
        this.error = message;
        return this.finish([
          this.replyEnvelope(record, r, 'failed', {
            type: 'agent_reply_error',
            stop_reason: 'error',
            payload: { ...payload, code: 'agent_reply_error', error: message },
          }),
        ]);
      case 'canceled':
        endReply(r);
        this.status = 'canceled';
        return this.finish([
          this.replyEnvelope(record, r, 'cancelled', { stop_reason: 'user_stop', payload }),
        ]);
      case 'rejected':
        endReply(r);
        this.status = 'rejected';
        return this.finish([
          this.replyEnvelope(record, r, 'refused', { type: 'agent_busy', stop_reason: 'refused', payload }),
        ]);
      default:
        this.running('running');
        if (view.reopen !== null) {
          // 0.5+: an on-task-end hook reopened the task instead of writing its final. The attempt's
          // reply is complete (as the spec's line shows it at its first final); the next attempt is a
          // new reply, and the task ends only at its one final status.
          endReply(r);
          return this.out([this.replyEnvelope(record, r, 'completed', { stop_reason: 'end_turn', payload })]);
        }
        return this.out([this.replyEnvelope(record, r, 'streaming', { payload })]);
    }
  }

  /**
   * A non-final status. After a recorded cancel the task reads `canceled` even when frames the
   * capsule wrote before it stopped are ingested after the close record.
   */
  private running(status: 'running' | 'input_required'): void {
    if (!this.cancelled) this.status = status;
  }
}
