/**
 * What a `DefaultChatTransport` sends (notes/ai-sdk-client.md §2), checked: the chat id, and the
 * user message to send, which is the last of `messages` (the whole history the client holds; the
 * gateway keeps its own) or `message` (what a `prepareSendMessagesRequest` sending only the last
 * message puts there).
 */
import { z } from 'zod';
import { AiSdkError } from './errors.js';

/** Longest chat id and message id accepted. */
const MAX_ID = 256;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A chat id or a message id: 1 to 256 characters, no control character, not `.` or `..`. */
export const checkId = (what: string, id: string): string => {
  if (id.length === 0 || id.length > MAX_ID)
    throw new AiSdkError('invalid_request', `${what} must be 1 to ${MAX_ID} characters`);
  if (CONTROL.test(id))
    throw new AiSdkError('invalid_request', `${what} must not contain control characters`);
  if (id === '.' || id === '..') throw new AiSdkError('invalid_request', `${what} must not be "." or ".."`);
  return id;
};

const part = z.looseObject({ type: z.string() });
const uiMessage = z.looseObject({
  id: z.string(),
  role: z.enum(['system', 'user', 'assistant']),
  parts: z.array(part),
});

const sendBody = z.looseObject({
  id: z.string(),
  messages: z.array(z.unknown()).optional(),
  message: z.unknown().optional(),
  trigger: z.enum(['submit-message', 'regenerate-message']).optional(),
  messageId: z.string().optional(),
});

export interface SendRequest {
  chatId: string;
  userMessageId: string;
  /** The text the capsule receives: the message's text parts, joined by blank lines. */
  text: string;
}

const issueOf = (error: z.ZodError, prefix: string): string => {
  const issue = error.issues[0];
  return issue ? `${[prefix, ...issue.path].filter((p) => p !== '').join('.')}: ${issue.message}` : prefix;
};

export const parseSendBody = (json: unknown): SendRequest => {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new AiSdkError('invalid_request', 'the body must be a JSON object');
  const parsed = sendBody.safeParse(json);
  if (!parsed.success) throw new AiSdkError('invalid_request', issueOf(parsed.error, ''));
  const body = parsed.data;
  const chatId = checkId('id', body.id);
  if (body.trigger === 'regenerate-message')
    throw new AiSdkError(
      'invalid_request',
      'regenerate is not supported: a capsule keeps its own conversation, which cannot be rewound',
    );
  const last = body.message !== undefined ? body.message : body.messages?.[body.messages.length - 1];
  if (last === undefined) throw new AiSdkError('no_user_message', 'the body holds no message to send');
  const message = uiMessage.safeParse(last);
  if (!message.success) throw new AiSdkError('invalid_request', issueOf(message.error, 'message'));
  if (message.data.role !== 'user')
    throw new AiSdkError('no_user_message', 'the last message must be a user message');
  const userMessageId = checkId('message id', message.data.id);
  const texts: string[] = [];
  for (const p of message.data.parts) {
    if (p.type === 'text') {
      if (typeof p.text !== 'string')
        throw new AiSdkError('invalid_request', 'a text part needs a string text');
      texts.push(p.text);
    } else if (p.type === 'file')
      throw new AiSdkError('invalid_request', 'file parts are not supported: capsules take text only');
  }
  const text = texts.join('\n\n');
  if (text.trim() === '') throw new AiSdkError('no_user_message', 'the user message has no text');
  return { chatId, userMessageId, text };
};
