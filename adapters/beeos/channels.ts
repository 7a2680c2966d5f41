/**
 * The channel registry: task / conversation id → owner, kind, context, creation offset, idempotency
 * keys, closed. Held in memory per capsule and rebuilt lazily from the log (the durable records of
 * records.ts) on first access, so it survives a gateway restart on Redis. Projection lives elsewhere.
 */
import type { GatewayCore } from '../../src/core/types.js';
import { READ_PAGE } from './constants.js';
import { beeosMeta } from './records.js';

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
   * Capsule task ids this process learnt from an accepted submission. A cancel right after creation
   * must reach the capsule before its first frame is in the log; after a restart the projection's
   * task ids (frames already ingested) stand in.
   */
  upstreamTaskIds?: string[];
  /** Settles when a task's submission has its outcome (idempotent retries wait on it). */
  pending?: Promise<unknown>;
}

interface CapsuleChannels {
  byId: Map<string, Channel>;
  byKey: Map<string, Channel>;
}

const keyOf = (owner: string, key: string): string => `${owner}\u0000${key}`;

export class ChannelRegistry {
  private readonly capsules = new Map<string, Promise<CapsuleChannels>>();

  constructor(private readonly core: GatewayCore) {}

  /** The capsule's channels, loading them from the log once. A failed load is retried next time. */
  private load(capsule: string): Promise<CapsuleChannels> {
    let p = this.capsules.get(capsule);
    if (!p) {
      p = this.rebuild(capsule);
      p.catch(() => this.capsules.delete(capsule));
      this.capsules.set(capsule, p);
    }
    return p;
  }

  private async rebuild(capsule: string): Promise<CapsuleChannels> {
    const state: CapsuleChannels = { byId: new Map(), byKey: new Map() };
    let after = 0;
    // Bounded: every page advances `after`; stop at the head seen when the rebuild started.
    const { head } = await this.core.position(capsule);
    /** A task's submission messageId → its channel: a failed submission made no task. */
    const taskOf = new Map<string, Channel>();
    while (after < head) {
      const page = await this.core.read(capsule, after, READ_PAGE);
      if (page.records.length === 0) break;
      for (const record of page.records) {
        after = record.offset;
        if (record.kind === 'fact' && record.fact === 'submission-failed') {
          const failed = taskOf.get(record.messageId);
          if (failed) this.unindex(state, failed);
          continue;
        }
        const meta = beeosMeta(record);
        if (!meta || record.kind !== 'submission' || !meta.channelId) continue;
        if (meta.op === 'task' || meta.op === 'conversation-open') {
          const channel: Channel = {
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
          this.index(state, channel);
          if (meta.op === 'task') taskOf.set(record.messageId, channel);
        } else if (meta.op === 'close') {
          const channel = state.byId.get(meta.channelId);
          if (channel) channel.closed = true;
        }
      }
    }
    return state;
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

  async get(capsule: string, id: string): Promise<Channel | undefined> {
    return (await this.load(capsule)).byId.get(id);
  }

  async byIdempotencyKey(capsule: string, owner: string, key: string): Promise<Channel | undefined> {
    return (await this.load(capsule)).byKey.get(keyOf(owner, key));
  }

  /** Register a channel made by this process (its creation record is being or was just written). */
  async add(channel: Channel): Promise<void> {
    this.index(await this.load(channel.capsule), channel);
  }

  /** Forget a channel whose creation record could not be written. */
  async remove(channel: Channel): Promise<void> {
    this.unindex(await this.load(channel.capsule), channel);
  }
}
