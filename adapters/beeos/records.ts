/**
 * The durable facts the BeeOS surface writes into a capsule's log, as SubmissionEntry records with
 * protocol 'beeos' and `meta.beeos` (docs/surfaces/beeos.md "Durable records"). The registry and the projection
 * read them back; nothing else interprets them.
 */
import type { LogRecord, SubmissionEntry } from '../../src/log/record.js';

export type BeeosOp = 'task' | 'message' | 'invoke' | 'conversation-open' | 'close' | 'outcome';

export interface BeeosMeta {
  op: BeeosOp;
  /** Task or conversation id (absent on invoke). */
  channelId?: string;
  kind?: 'task' | 'conversation';
  idempotencyKey?: string;
  /** close: why ('cancel' for task cancel, 'delete' for DELETE). */
  reason?: 'cancel' | 'delete';
  /**
   * outcome: what the capsule answered the submission with. `accepted` carries the capsule's task id
   * (`taskId`) so any replica, or a rebuild, can cancel the task and attribute its frames.
   */
  outcome?: 'accepted' | 'rejected' | 'unreachable' | 'invalid' | 'method-not-found';
  /** outcome `accepted`: the capsule's task id. */
  taskId?: string;
  code?: string;
  message?: string;
  /** outcome: the caller message it answers. */
  inReplyTo?: string;
  metadata?: unknown;
}

/** The BeeOS meta of a submission record, or null for other records. */
export const beeosMeta = (record: LogRecord): BeeosMeta | null => {
  if (record.kind !== 'submission' || record.protocol !== 'beeos') return null;
  const meta = record.meta?.beeos;
  if (!meta || typeof meta !== 'object') return null;
  return meta as BeeosMeta;
};

/** A surface-made record (conversation open, close, outcome): not a message to the capsule. */
export const beeosEntry = (
  owner: string,
  contextId: string,
  messageId: string,
  meta: BeeosMeta,
): SubmissionEntry => ({
  kind: 'submission',
  protocol: 'beeos',
  owner,
  contextId,
  messageId,
  text: '',
  meta: { beeos: meta },
  receivedAt: Date.now(),
});
