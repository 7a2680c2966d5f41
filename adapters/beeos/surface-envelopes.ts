/**
 * The envelopes of the records the BeeOS surface itself wrote (records.ts): a cancel, a refused or
 * failed submission outcome, a submission the store recorded too late. Pure builders; when each
 * applies, and what it does to the channel's status, is projection.ts's.
 */
import { OFFSET_SLOTS, SLOT_MAIN } from './constants.js';
import { stableUuid } from './envelope.js';
import type { ChannelSpec, Envelope } from './envelope.js';
import { receivedIso } from '../../src/log/record.js';
import type { BeeosMeta } from './records.js';

type Base = Pick<Envelope, 'offset' | 'created_at' | 'updated_at'>;

export const NEVER_MADE_MESSAGE =
  'the message was not recorded in time (log store unavailable) and was never delivered';

/** `chat_cancel` for a task cancel's close record. */
export const cancelEnvelope = (base: Base, messageId: string, user: string): Envelope => ({
  ...base,
  type: 'chat_cancel',
  message_id: messageId,
  publisher_id: user,
  state: 'completed',
  payload: {},
});

/** `agent_busy` (refused) or `agent_reply_error` (unreachable, invalid) for an outcome record. */
export const outcomeEnvelope = (
  base: Base,
  messageId: string,
  meta: BeeosMeta,
  refused: boolean,
  agentId: string,
): Envelope => ({
  ...base,
  type: refused ? 'agent_busy' : 'agent_reply_error',
  message_id: messageId,
  ...(meta.inReplyTo ? { in_reply_to: meta.inReplyTo } : {}),
  publisher_id: `agent:${agentId}`,
  state: refused ? 'refused' : 'failed',
  stop_reason: refused ? 'refused' : 'agent_lost',
  payload: { code: meta.code ?? null, error: meta.message ?? null },
});

/** `agent_reply_error` for a caller message whose record became durable after its caller was told it failed. */
export const neverMadeEnvelope = (
  spec: Pick<ChannelSpec, 'contextId' | 'agentId'>,
  record: { offset: number; receivedAt: number; messageId: string },
  /** Why it never ran (a withdrawn queued message); default: the store was down at admission. */
  error: string = NEVER_MADE_MESSAGE,
): Envelope => {
  const at = receivedIso(record.receivedAt);
  return {
    type: 'agent_reply_error',
    message_id: stableUuid(spec.contextId, record.messageId, 'submission-failed'),
    offset: record.offset * OFFSET_SLOTS + SLOT_MAIN,
    in_reply_to: record.messageId,
    publisher_id: `agent:${spec.agentId}`,
    state: 'failed',
    stop_reason: 'agent_lost',
    payload: { code: 'agent_service_unavailable', error },
    created_at: at,
    updated_at: at,
  };
};
