/**
 * Projector states kept per (capsule, conversation, epoch, offset), a small LRU: an updates read
 * from the offset a previous read ended at (the SDK's history → updates, a long-poll loop) starts
 * from that state and reads only the records after it, instead of the conversation from its start.
 */
import type { ConversationProjector } from './projection.js';

const DEFAULT_CAPACITY = 256;

const keyOf = (capsule: string, conversationId: string, epoch: number): string =>
  `${capsule}\u0000${conversationId}\u0000${epoch}`;

export class SnapshotCache {
  /** conversation key → offset → projector; Map order is the LRU order (oldest first). */
  private readonly byConversation = new Map<string, Map<number, ConversationProjector>>();
  private size = 0;

  constructor(private readonly capacity = DEFAULT_CAPACITY) {}

  /** Keep `projector` as the state through `offset`. The cache owns it from now on. */
  put(capsule: string, offset: number, projector: ConversationProjector): void {
    const key = keyOf(capsule, projector.conversationId, projector.epoch);
    let states = this.byConversation.get(key);
    if (!states) {
      states = new Map();
      this.byConversation.set(key, states);
    }
    if (!states.has(offset)) this.size++;
    states.delete(offset);
    states.set(offset, projector);
    this.touch(key, states);
    while (this.size > this.capacity) this.evictOldest();
  }

  /** A copy of the latest state at or before `through`, with its offset; null when none is kept. */
  nearest(
    capsule: string,
    conversationId: string,
    epoch: number,
    through: number,
  ): { offset: number; projector: ConversationProjector } | null {
    const key = keyOf(capsule, conversationId, epoch);
    const states = this.byConversation.get(key);
    if (!states) return null;
    let best: number | null = null;
    for (const offset of states.keys())
      if (offset <= through && (best === null || offset > best)) best = offset;
    if (best === null) return null;
    const projector = states.get(best)!;
    this.touch(key, states);
    return { offset: best, projector: projector.clone() };
  }

  private touch(key: string, states: Map<number, ConversationProjector>): void {
    this.byConversation.delete(key);
    this.byConversation.set(key, states);
  }

  /** Drop the oldest offset of the least recently used conversation. */
  private evictOldest(): void {
    const [key, states] = this.byConversation.entries().next().value ?? [];
    if (!key || !states) return;
    const oldest = states.keys().next().value;
    if (oldest !== undefined) {
      states.delete(oldest);
      this.size--;
    }
    if (states.size === 0) this.byConversation.delete(key);
  }
}
