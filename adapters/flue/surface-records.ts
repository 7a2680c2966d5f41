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

export const messageMetaOf = (record: SubmissionEntry): MessageMeta | null =>
  record.protocol === 'flue' && record.meta?.flue === RECORD_KIND.message
    ? (record.meta as unknown as MessageMeta)
    : null;

export const settlementMetaOf = (record: SubmissionEntry): SettlementMeta | null =>
  record.protocol === 'flue' && record.meta?.flue === RECORD_KIND.settlement
    ? (record.meta as unknown as SettlementMeta)
    : null;

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
