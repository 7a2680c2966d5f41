/**
 * The channel registry: task / conversation id → owner, kind, context, creation offset, idempotency
 * keys, closed, the capsule task ids it was answered with. Derived from the log (the durable records
 * of records.ts): every access first follows the capsule's log from where this process last read it
 * up to the head, so a channel created, closed or answered through ANOTHER replica (or before a
 * restart) is seen here at once, as soon as its record is durable: one position call per access,
 * and a read only of what neither an earlier access nor the live feed (observe) has applied.
 * Rebuilt when the store epoch changes. Channels this process is creating are indexed before their record is durable.
 * An AI SDK chat is a conversation too (other-surface-records.ts): indexed from its first message
 * record by its owner and `chat_<chatId>`, since two owners' chats may share an id.
 */
import type { GatewayCore } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import { READ_PAGE } from './constants.js';
import { beeosMeta } from './records.js';
import { chatConversationId, chatIdOf, isChatConversationId } from './other-surface-records.js';

export interface Channel {
  id: string;
  kind: 'task' | 'conversation';
  capsule: string;
  owner: string;
  contextId: string;
  /** Log offset of the record that created the channel (0 while a task submission is in flight). */
  startOffset: number;
  createdAt: number;
  closed: boolean;
  idempotencyKey?: string;
  /** The task's message text, to tell a reused idempotency key with another body (409). */
  text?: string;
  /**
   * Capsule task ids the channel's submissions were accepted as (learnt by this process from the
   * outcome, or from the `accepted` outcome records of any replica). A cancel right after creation
   * must reach the capsule before the task's first frame is in the log, or when it never will be.
   */
  upstreamTaskIds?: string[];
  /** Settles when a task's submission has its outcome (idempotent retries wait on it). */
  pending?: Promise<unknown>;
  /** An AI SDK chat's conversation: the chat id. It lives as long as the chat: never closed here. */
  chatId?: string;
  /**
   * A chat's conversation: the log offset of the chat's first message, its place in listings (its
   * `startOffset` moves back to its context's first record once that is looked up).
   */
  chatStart?: number;
  /** A chat's conversation: `startOffset` is its context's first retained record. */
  contextStartFound?: boolean;
}

interface CapsuleChannels {
  epoch: number;
  /** Every record up to this offset has been applied. */
  through: number;
  byId: Map<string, Channel>;
  byKey: Map<string, Channel>;
  /** AI SDK chats' conversations by owner and id (`chat_<chatId>`). */
  chats: Map<string, Channel>;
  /** A task's submission messageId → its channel: a failed submission made no task. */
  taskOf: Map<string, Channel>;
  /** A task's or conversation turn's messageId → its channel (a queued one's task id comes later). */
  submittedBy: Map<string, Channel>;
}

const keyOf = (owner: string, key: string): string => `${owner}\u0000${key}`;

/** Where a conversation is listed (and the list's cursor): its creation record, a chat's first message. */
export const listedAt = (channel: Channel): number => channel.chatStart ?? channel.startOffset;

const emptyState = (epoch: number): CapsuleChannels => ({
  epoch,
  through: 0,
  byId: new Map(),
  byKey: new Map(),
  chats: new Map(),
  taskOf: new Map(),
  submittedBy: new Map(),
});

export class ChannelRegistry {
  private readonly capsules = new Map<string, CapsuleChannels>();
  /** One catch-up at a time per capsule; callers arriving meanwhile chain onto it. */
  private readonly running = new Map<string, Promise<CapsuleChannels>>();

  constructor(private readonly core: GatewayCore) {}

  /** The capsule's channels, brought up to the log head. A failed read is the caller's error. */
  private load(capsule: string): Promise<CapsuleChannels> {
    const previous = this.running.get(capsule) ?? Promise.resolve(undefined);
    const next = previous.catch(() => undefined).then(() => this.follow(capsule));
    this.running.set(capsule, next);
    const forget = (): void => {
      if (this.running.get(capsule) === next) this.running.delete(capsule);
    };
    next.then(forget, forget);
    return next;
  }

  private async follow(capsule: string): Promise<CapsuleChannels> {
    // What was applied before asking (the feed may apply more while we wait, never past the head).
    const applied = this.capsules.get(capsule)?.through ?? 0;
    const position = await this.core.position(capsule);
    let state = this.capsules.get(capsule);
    if (!state || state.epoch !== position.epoch || applied > position.head) {
      // Another generation of the store: what this process indexed may name records that are gone.
      state = emptyState(position.epoch);
      this.capsules.set(capsule, state);
    }
    // Bounded: every page advances `through`; stop at the head seen when the catch-up started.
    while (state.through < position.head) {
      const page = await this.core.read(capsule, state.through, READ_PAGE);
      if (page.position.epoch !== state.epoch) return this.follow(capsule);
      if (page.records.length === 0) break;
      for (const record of page.records) {
        // The live feed (observe) may have applied this record already while we read.
        if (record.offset <= state.through) continue;
        state.through = record.offset;
        this.apply(state, capsule, record);
      }
    }
    state.through = Math.max(state.through, position.head);
    return state;
  }

  private apply(state: CapsuleChannels, capsule: string, record: LogRecord): void {
    if (record.kind === 'fact' && record.fact === 'submission-started') {
      // A queued message the capsule took: the channel can cancel and attribute its task.
      const channel = state.submittedBy.get(record.messageId);
      const ids = channel ? (channel.upstreamTaskIds ??= []) : null;
      if (ids && !ids.includes(record.taskId)) ids.push(record.taskId);
      return;
    }
    if (record.kind === 'fact' && record.fact === 'submission-failed') {
      const failed = state.taskOf.get(record.messageId);
      if (failed) this.unindex(state, failed);
      return;
    }
    if (record.kind === 'submission') {
      const chatId = chatIdOf(record);
      if (chatId !== null) return this.applyChatMessage(state, capsule, record, chatId);
    }
    const meta = beeosMeta(record);
    if (!meta || record.kind !== 'submission' || !meta.channelId) return;
    if (meta.op === 'task' || meta.op === 'conversation-open') {
      // A channel this process created is already indexed (same object: its `pending` stays).
      const known = state.byId.get(meta.channelId);
      const channel: Channel = known ?? {
        id: meta.channelId,
        kind: meta.op === 'task' ? 'task' : 'conversation',
        capsule,
        owner: record.owner ?? '',
        contextId: record.contextId,
        startOffset: record.offset,
        createdAt: record.receivedAt,
        closed: false,
        ...(meta.idempotencyKey ? { idempotencyKey: meta.idempotencyKey } : {}),
        ...(meta.op === 'task' ? { text: record.text } : {}),
      };
      channel.startOffset = record.offset;
      if (!known) this.index(state, channel);
      if (meta.op === 'task') state.taskOf.set(record.messageId, channel);
      if (meta.op === 'task') state.submittedBy.set(record.messageId, channel);
      return;
    }
    const channel = isChatConversationId(meta.channelId)
      ? state.chats.get(keyOf(record.owner ?? '', meta.channelId))
      : state.byId.get(meta.channelId);
    if (!channel) return;
    if (meta.op === 'message') state.submittedBy.set(record.messageId, channel);
    if (meta.op === 'close') channel.closed = true;
    else if (meta.op === 'outcome' && meta.outcome === 'accepted' && meta.taskId) {
      const ids = (channel.upstreamTaskIds ??= []);
      if (!ids.includes(meta.taskId)) ids.push(meta.taskId);
    }
  }

  /** An AI SDK chat's message: the chat's conversation starts with its first one. */
  private applyChatMessage(
    state: CapsuleChannels,
    capsule: string,
    record: LogRecord & { kind: 'submission' },
    chatId: string,
  ): void {
    const owner = record.owner ?? '';
    const id = chatConversationId(chatId);
    let channel = state.chats.get(keyOf(owner, id));
    if (!channel) {
      channel = {
        id,
        kind: 'conversation',
        capsule,
        owner,
        contextId: record.contextId,
        startOffset: record.offset,
        createdAt: record.receivedAt,
        closed: false,
        chatId,
        chatStart: record.offset,
      };
      state.chats.set(keyOf(owner, id), channel);
    }
    // Its task, once the queue hands it over, is the conversation's (cancel, attribution).
    state.submittedBy.set(record.messageId, channel);
  }

  private index(state: CapsuleChannels, channel: Channel): void {
    state.byId.set(channel.id, channel);
    if (channel.idempotencyKey) state.byKey.set(keyOf(channel.owner, channel.idempotencyKey), channel);
  }

  private unindex(state: CapsuleChannels, channel: Channel): void {
    if (state.byId.get(channel.id) === channel) state.byId.delete(channel.id);
    const key = channel.idempotencyKey ? keyOf(channel.owner, channel.idempotencyKey) : null;
    if (key && state.byKey.get(key) === channel) state.byKey.delete(key);
  }

  /**
   * Records the BeeOS live feed just dispatched, `before` being the offset it had reached: applied
   * when they continue what the registry has, so a request on a busy capsule finds `through` at (or
   * near) the head and reads nothing, or only the few records the feed has not seen yet.
   */
  observe(capsule: string, records: readonly LogRecord[], before: number): void {
    const state = this.capsules.get(capsule);
    if (!state || before > state.through) return;
    for (const record of records) {
      if (record.offset <= state.through) continue;
      state.through = record.offset;
      this.apply(state, capsule, record);
    }
  }

  /** The channel `id` as `owner` names it: a chat's conversation id is the owner's own chat. */
  async get(capsule: string, id: string, owner: string): Promise<Channel | undefined> {
    const state = await this.load(capsule);
    if (!isChatConversationId(id)) return state.byId.get(id);
    const chat = state.chats.get(keyOf(owner, id));
    if (chat && !chat.contextStartFound) {
      // The chat's context may hold messages from before its first AI SDK one (a Flue message, a
      // task with its `context_id`): the chat's own history shows them, so the conversation does.
      const first = await this.core.contextFirst(capsule, chat.contextId);
      if (first !== null && first < chat.startOffset) chat.startOffset = first;
      chat.contextStartFound = true;
    }
    return chat;
  }

  /** `owner`'s conversations of the capsule (minted and chats'), oldest first. */
  async conversations(capsule: string, owner: string): Promise<Channel[]> {
    const state = await this.load(capsule);
    const out: Channel[] = [];
    for (const c of state.byId.values()) if (c.kind === 'conversation' && c.owner === owner) out.push(c);
    for (const c of state.chats.values()) if (c.owner === owner) out.push(c);
    return out.sort((a, b) => listedAt(a) - listedAt(b));
  }

  async byIdempotencyKey(capsule: string, owner: string, key: string): Promise<Channel | undefined> {
    return (await this.load(capsule)).byKey.get(keyOf(owner, key));
  }

  /** Register a channel made by this process (its creation record is being or was just written). */
  async add(channel: Channel): Promise<void> {
    const state = await this.load(channel.capsule);
    // Its record may already have been read from the log: this object (the one its creator
    // updates) takes the other's place, keeping what the log said.
    const read = state.byId.get(channel.id);
    if (read && read !== channel) {
      channel.startOffset = read.startOffset;
      channel.closed ||= read.closed;
      if (read.upstreamTaskIds) channel.upstreamTaskIds = [...read.upstreamTaskIds];
      for (const [messageId, c] of state.taskOf) if (c === read) state.taskOf.set(messageId, channel);
    }
    this.index(state, channel);
  }

  /** Forget a channel whose creation record could not be written. */
  async remove(channel: Channel): Promise<void> {
    this.unindex(await this.load(channel.capsule), channel);
  }
}
