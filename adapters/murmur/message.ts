/**
 * Reads what the gateway needs from a `message/stream` call to record it (message id, text, context)
 * and, when the message is well formed but names no context, adds a context id the gateway mints,
 * so the log can attribute the task to a context. Validation proper stays the capsule's.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';

const messageSchema = z.object({
  messageId: z.string(),
  role: z.string(),
  parts: z.array(z.object({ text: z.string() }).loose()),
  contextId: z.string().nullish(),
});

export interface PreparedMessage {
  /** The body to forward: the client's, byte for byte, unless a context id was added. */
  rawBody: string;
  contextId: string;
  messageId: string;
  text: string;
}

/** A UUIDv7 as 32 hex digits (spec: `ctx_` and a UUIDv7). */
const uuidv7Hex = (): string => {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(Date.now(), 0, 6);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  return bytes.toString('hex');
};

/** A context id in the capsule's own form. */
export const mintContextId = (): string => `ctx_${uuidv7Hex()}`;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The message sits under `params.message` when params has that key, else it is `params` itself
 * (spec "Endpoints"). A message that would not parse is forwarded untouched, so the capsule's
 * `error` frame answers it byte for byte; the record then names no context ('').
 */
export const prepareMessage = (envelope: Record<string, unknown>, rawBody: string): PreparedMessage => {
  const params = envelope.params;
  const nested = isObject(params) && 'message' in params;
  const candidate: unknown = nested ? params.message : params;
  const parsed = messageSchema.safeParse(candidate);
  if (!parsed.success || !isObject(candidate)) return { rawBody, contextId: '', messageId: '', text: '' };
  const message = parsed.data;
  const text = message.parts.map((p) => p.text).join('');
  if (typeof message.contextId === 'string')
    return { rawBody, contextId: message.contextId, messageId: message.messageId, text };
  // No context: mint one the way the capsule would, so the submission record and the task's frames
  // share it. Only a well-formed message is rewritten, so no validation answer can change.
  const contextId = mintContextId();
  const withContext = { ...candidate, contextId };
  const body = nested
    ? { ...envelope, params: { ...(params as Record<string, unknown>), message: withContext } }
    : { ...envelope, params: withContext };
  return { rawBody: JSON.stringify(body), contextId, messageId: message.messageId, text };
};
