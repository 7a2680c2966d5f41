/**
 * What the AI SDK surface records with its submissions (`meta.aiSdk`): read back by the chat's
 * projection here, and by the surfaces that read a chat as their own conversation (Flue, BeeOS).
 */
import type { SubmissionEntry } from '../../src/log/record.js';

export type AiSdkMeta =
  | {
      op: 'message';
      userMessageId: string;
      assistantMessageId: string;
      /** The chat id as the client chose it (the context is it, namespaced by owner): BeeOS names the chat's conversation by it. */
      chatId?: string;
    }
  /** A submission the capsule will never run (refused outright): ends its turn with the reason. */
  | { op: 'failed'; inReplyTo: string; error: string };

export const aiSdkMeta = (record: SubmissionEntry): AiSdkMeta | null => {
  if (record.protocol !== 'ai-sdk') return null;
  const meta = record.meta?.aiSdk;
  return meta && typeof meta === 'object' ? (meta as AiSdkMeta) : null;
};
