/** The params of the methods, checked (notes A3: 1.0 ProtoJSON, or 0.3 `kind`-tagged objects). */
import { z } from 'zod';
import type { Dialect } from './dialect.js';
import { A2aError, CODE, invalidParams } from './errors.js';
import { CONTEXT_ID } from './task-ids.js';

/** Longest user message text accepted (the body limit bounds it first). */
const MAX_TEXT = 1_000_000;

const part = z
  .object({
    kind: z.string().optional(),
    text: z.string().optional(),
    raw: z.unknown().optional(),
    url: z.unknown().optional(),
    data: z.unknown().optional(),
    file: z.unknown().optional(),
  })
  .passthrough();

const message = z
  .object({
    messageId: z.string().min(1).max(256),
    role: z.string(),
    parts: z.array(part).min(1),
    contextId: z.string().optional(),
    taskId: z.string().optional(),
    kind: z.string().optional(),
  })
  .passthrough();

const sendParams = z
  .object({ message, configuration: z.record(z.string(), z.unknown()).optional() })
  .passthrough();

export interface UserMessage {
  messageId: string;
  text: string;
  contextId: string | null;
  /**
   * A webhook for the task, as sent (1.0 `configuration.taskPushNotificationConfig`, 0.3
   * `configuration.pushNotificationConfig`): checked by push-params.ts; null: none.
   */
  push: unknown;
}

const issueText = (error: z.ZodError): string => {
  const issue = error.issues[0];
  return issue ? `${issue.path.join('.') || 'params'}: ${issue.message}` : 'invalid params';
};

export const parseMessage = (params: Record<string, unknown>, dialect: Dialect): UserMessage => {
  const parsed = sendParams.safeParse(params);
  if (!parsed.success) throw invalidParams(issueText(parsed.error));
  const cfg = parsed.data.configuration ?? {};
  const push = (dialect === '1.0' ? cfg.taskPushNotificationConfig : cfg.pushNotificationConfig) ?? null;
  const m = parsed.data.message;
  const userRole = dialect === '1.0' ? 'ROLE_USER' : 'user';
  if (m.role !== userRole) throw invalidParams(`message.role must be ${userRole}`);
  if (m.taskId !== undefined && m.taskId !== '')
    throw new A2aError(CODE.unsupportedOperation, 'continuing a task (message.taskId) is not supported');
  const texts: string[] = [];
  for (const p of m.parts) {
    if (typeof p.text !== 'string' || (dialect === '0.3' && p.kind !== undefined && p.kind !== 'text'))
      throw new A2aError(CODE.contentTypeNotSupported, 'only text parts are supported');
    texts.push(p.text);
  }
  const text = texts.join('\n');
  if (text.length > MAX_TEXT) throw invalidParams('message text is too long');
  const contextId = m.contextId === undefined || m.contextId === '' ? null : m.contextId;
  if (contextId !== null && !CONTEXT_ID.test(contextId))
    throw invalidParams('message.contextId must be 1 to 128 printable ASCII characters');
  return { messageId: m.messageId, text, contextId, push };
};

const taskQuery = z
  .object({ id: z.string().min(1).max(512), historyLength: z.number().int().min(0).optional() })
  .passthrough();

export const parseTaskQuery = (params: Record<string, unknown>): { id: string; historyLength?: number } => {
  const parsed = taskQuery.safeParse(params);
  if (!parsed.success) throw invalidParams(issueText(parsed.error));
  return parsed.data.historyLength === undefined
    ? { id: parsed.data.id }
    : { id: parsed.data.id, historyLength: parsed.data.historyLength };
};
