/**
 * The Flue surface's own records in the capsule log (written by admission.ts): a message
 * submission's `meta`, the settlement record of a submission that never reached a task, and the
 * snapshot message an admitted submission becomes. Shapes and readers only.
 */
import type { SubmissionEntry } from '../../src/log/record.js';
import type { FlueMessage, SettlementOutcome } from './chunks.js';
import { RECORD_KIND } from './constants.js';

/** `meta` of a Flue message submission record (written by admission.ts). */
export interface MessageMeta {
  flue: typeof RECORD_KIND.message;
  submissionId: string;
  uid: string;
  kind: 'user' | 'signal';
  /** The body as the client sent it (the capsule got `text`, which wraps signals). */
  body: string;
  signal?: { type: string; tagName?: string; attributes?: Record<string, string> };
  idempotencyKey?: string;
  fingerprint?: string;
}

/** `meta` of the surface's settlement record, appended when a submission never reached a task. */
export interface SettlementMeta {
  flue: typeof RECORD_KIND.settlement;
  submissionId: string;
  outcome: SettlementOutcome;
  error?: unknown;
}

/**
 * The AI SDK surface's records (adapters/ai-sdk/records.ts `AiSdkMeta`): a chat is a capsule
 * context like a conversation, so its messages and refusals read here as Flue's own would.
 */
const aiSdkOp = (record: SubmissionEntry): Record<string, unknown> | null => {
  const meta = record.protocol === 'ai-sdk' ? record.meta?.aiSdk : undefined;
  return meta && typeof meta === 'object' ? (meta as Record<string, unknown>) : null;
};

export const messageMetaOf = (record: SubmissionEntry): MessageMeta | null => {
  if (record.protocol === 'flue' && record.meta?.flue === RECORD_KIND.message)
    return record.meta as unknown as MessageMeta;
  if (aiSdkOp(record)?.op !== 'message') return null;
  return {
    flue: RECORD_KIND.message,
    submissionId: `sub_${record.messageId}`,
    uid: `uid_${record.messageId}`,
    kind: 'user',
    body: record.text,
  };
};

export const settlementMetaOf = (record: SubmissionEntry): SettlementMeta | null => {
  if (record.protocol === 'flue' && record.meta?.flue === RECORD_KIND.settlement)
    return record.meta as unknown as SettlementMeta;
  const op = aiSdkOp(record);
  if (op?.op !== 'failed' || typeof op.inReplyTo !== 'string') return null;
  return {
    flue: RECORD_KIND.settlement,
    submissionId: `sub_${op.inReplyTo}`,
    outcome: 'failed',
    error: { message: typeof op.error === 'string' ? op.error : 'failed' },
  };
};

/** The snapshot message of an admitted submission (§message-appended: user turn or system signal). */
export const messageOf = (meta: MessageMeta, messageId: string): FlueMessage =>
  meta.kind === 'user'
    ? {
        id: messageId,
        role: 'user',
        purpose: 'user',
        display: 'visible',
        submissionId: meta.submissionId,
        parts: [{ type: 'text', text: meta.body, state: 'done' }],
      }
    : {
        id: messageId,
        role: 'system',
        purpose: 'dispatch',
        display: 'diagnostic',
        submissionId: meta.submissionId,
        signal: {
          tagName: meta.signal?.tagName ?? meta.signal?.type ?? '',
          ...(meta.signal?.attributes ? { attributes: meta.signal.attributes } : {}),
        },
        parts: [{ type: 'text', text: meta.body, state: 'done' }],
      };
