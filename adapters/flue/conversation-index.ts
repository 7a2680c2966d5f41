/**
 * Per-capsule index of Flue conversations kept in memory and refreshed incrementally from the log:
 * which context ids exist (their first admitted message), their uid, and idempotency receipts. A
 * lookup asks the store for its position (so what another replica admitted is seen at once) and
 * reads only the records it has not seen; the live feed hands it what it reads anyway. It is
 * rebuilt from scratch when the store epoch changes, so it is correct across generations.
 */
import type { GatewayCore } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import { SCAN_PAGE } from './constants.js';
import { messageMetaOf } from './projection.js';

export interface ConversationEntry {
  uid: string;
  createdAt: number;
  /** The A2A messageId of the submission that created it. */
  createdBy: string;
}

export interface Receipt {
  submissionId: string;
  uid: string;
  offset: number;
  fingerprint: string;
  messageId: string;
}

interface CapsuleIndex {
  epoch: number;
  through: number;
  conversations: Map<string, ConversationEntry>;
  receipts: Map<string, Receipt>;
}

export interface IndexView {
  epoch: number;
  head: number;
  conversation: ConversationEntry | undefined;
  receipt: (key: string) => Receipt | undefined;
}

const receiptKey = (conversationId: string, key: string): string => `${conversationId}\u0000${key}`;

/**
 * A submission its client was told failed (store down) was never made: its idempotency receipt must
 * not answer the client's retry as a duplicate, and a conversation it alone created does not exist.
 */
const forgetSubmission = (index: CapsuleIndex, messageId: string): void => {
  for (const [key, receipt] of index.receipts)
    if (receipt.messageId === messageId) index.receipts.delete(key);
  for (const [id, entry] of index.conversations)
    if (entry.createdBy === messageId) index.conversations.delete(id);
};

/** Fold one record (offset order, after `index.through`) into the index. */
const ingest = (index: CapsuleIndex, record: LogRecord): void => {
  index.through = record.offset;
  if (record.kind === 'fact' && record.fact === 'submission-failed') {
    forgetSubmission(index, record.messageId);
    return;
  }
  if (record.kind !== 'submission') return;
  const meta = messageMetaOf(record);
  if (!meta) return;
  if (!index.conversations.has(record.contextId))
    index.conversations.set(record.contextId, {
      uid: meta.uid,
      createdAt: record.offset,
      createdBy: record.messageId,
    });
  if (meta.idempotencyKey !== undefined)
    index.receipts.set(receiptKey(record.contextId, meta.idempotencyKey), {
      submissionId: meta.submissionId,
      uid: meta.uid,
      offset: record.offset,
      fingerprint: meta.fingerprint ?? '',
      messageId: record.messageId,
    });
};

export class ConversationIndex {
  private readonly capsules = new Map<string, CapsuleIndex>();
  private readonly running = new Map<string, Promise<CapsuleIndex>>();

  constructor(private readonly core: GatewayCore) {}

  /** Bring the capsule's index up to the log head and look one conversation up. */
  async lookup(capsule: string, conversationId: string): Promise<IndexView> {
    const index = await this.refresh(capsule);
    return {
      epoch: index.epoch,
      head: index.through,
      conversation: index.conversations.get(conversationId),
      receipt: (key) => index.receipts.get(receiptKey(conversationId, key)),
    };
  }

  /**
   * Records the Flue live feed saw, contiguous after `after`: when the index is exactly there it
   * takes them, so a refresh finds itself at the head and asks the store for its position only.
   */
  observe(capsule: string, epoch: number, after: number, records: readonly LogRecord[]): void {
    const index = this.capsules.get(capsule);
    if (!index || index.epoch !== epoch || index.through !== after) return;
    for (const record of records) if (record.offset > index.through) ingest(index, record);
  }

  /** One refresh at a time per capsule; callers arriving meanwhile chain onto it. */
  private refresh(capsule: string): Promise<CapsuleIndex> {
    const previous = this.running.get(capsule) ?? Promise.resolve(undefined);
    const next = previous.catch(() => undefined).then(() => this.scan(capsule));
    this.running.set(capsule, next);
    // Both branches handled: a failed refresh (store down) is the caller's error, not an unhandled one.
    const forget = (): void => {
      if (this.running.get(capsule) === next) this.running.delete(capsule);
    };
    next.then(forget, forget);
    return next;
  }

  private async scan(capsule: string): Promise<CapsuleIndex> {
    // The live feed may move `through` past the position read below: judge "the log went
    // backwards" by what the index held before asking.
    const held = this.capsules.get(capsule)?.through ?? 0;
    const position = await this.core.position(capsule);
    let index = this.capsules.get(capsule);
    if (!index || index.epoch !== position.epoch || Math.min(held, index.through) > position.head) {
      index = { epoch: position.epoch, through: 0, conversations: new Map(), receipts: new Map() };
      this.capsules.set(capsule, index);
    }
    // Bounded: each page advances `through`; stops at the head seen when the refresh began.
    while (index.through < position.head) {
      const { records, position: now } = await this.core.read(capsule, index.through, SCAN_PAGE);
      if (now.epoch !== index.epoch) return this.scan(capsule);
      if (records.length === 0) break;
      for (const record of records) if (record.offset > index.through) ingest(index, record);
    }
    index.through = Math.max(index.through, position.head);
    return index;
  }
}
