/**
 * Records other surfaces write into a context a BeeOS channel reads (docs/surfaces/beeos.md "AI SDK
 * chats as conversations"). An AI SDK chat is a capsule context: its messages make it a BeeOS
 * conversation (`chat_<chatId>`, owned by the chat's owner). Surface bookkeeping in a shared
 * context (an AI SDK refusal, a Flue settlement) is no caller message: a refusal ends the message
 * it names. Read by shape, as the Flue surface reads AI SDK records (adapters/flue/surface-records.ts):
 * adapters do not import each other.
 */
import { clientContext } from '../../src/auth/namespace.js';
import type { SubmissionEntry } from '../../src/log/record.js';

/** A chat's conversation id is this prefix and the chat id; minted ids are `conv_…` / `task_…`. */
export const CHAT_CONVERSATION_PREFIX = 'chat_';

export const chatConversationId = (chatId: string): string => `${CHAT_CONVERSATION_PREFIX}${chatId}`;

export const isChatConversationId = (id: string): boolean => id.startsWith(CHAT_CONVERSATION_PREFIX);

const surfaceMeta = (record: SubmissionEntry, key: string): Record<string, unknown> | null => {
  const meta = record.meta?.[key];
  return meta && typeof meta === 'object' ? (meta as Record<string, unknown>) : null;
};

/**
 * The chat id of an AI SDK message record (adapters/ai-sdk/records.ts `AiSdkMeta`): the chat's
 * conversation exists from its first one. Records that predate `chatId` name it by their context.
 */
export const chatIdOf = (record: SubmissionEntry): string | null => {
  if (record.protocol !== 'ai-sdk') return null;
  const meta = surfaceMeta(record, 'aiSdk');
  if (meta?.op !== 'message') return null;
  return typeof meta.chatId === 'string' ? meta.chatId : clientContext(record.contextId);
};

/** Another surface's record that a message of the context will never run, and why. */
export const refusalOf = (record: SubmissionEntry): { inReplyTo: string; error: string } | null => {
  if (record.protocol === 'ai-sdk') {
    // AI SDK `failed`: `inReplyTo` is the refused submission's messageId.
    const meta = surfaceMeta(record, 'aiSdk');
    if (meta?.op !== 'failed' || typeof meta.inReplyTo !== 'string') return null;
    return { inReplyTo: meta.inReplyTo, error: typeof meta.error === 'string' ? meta.error : 'refused' };
  }
  if (record.protocol === 'flue' && record.meta?.flue === 'settlement') {
    // A Flue settlement carries the messageId of the submission it settles.
    const error = surfaceMeta(record, 'error');
    return {
      inReplyTo: record.messageId,
      error: typeof error?.message === 'string' ? error.message : 'failed',
    };
  }
  return null;
};

/**
 * Another surface's bookkeeping (a settlement, a refusal): never queued and without text. A message
 * to the capsule is queued (AI SDK, Flue, A2A) or carries its text (native Murmur).
 */
export const isOtherSurfaceBookkeeping = (record: SubmissionEntry): boolean =>
  record.protocol !== 'beeos' && !record.queued && record.text === '';
