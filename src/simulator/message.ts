/**
 * Parse `message/stream` params as the capsule's serde-derived A2A message would, with serde-style
 * error text (spec "error": the text is later spliced into the `error` frame unescaped).
 */

export interface A2AMessage {
  messageId: string;
  role: string;
  parts: { text: string }[];
  contextId?: string;
  /** 1.0: continue this (ended) task. Earlier lines ignore the key, as serde ignores unknown keys. */
  taskId?: string;
}

export type MessageParse = { ok: true; message: A2AMessage } | { ok: false; error: string };

/** serde's `Unexpected` wording for a JSON value. */
const unexpected = (v: unknown): string => {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return `boolean \`${v}\``;
  if (typeof v === 'number') return Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``;
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  if (Array.isArray(v)) return 'sequence';
  return 'map';
};

const invalid = (v: unknown, expected: string): string =>
  `invalid type: ${unexpected(v)}, expected ${expected}`;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const parsePart = (v: unknown): string | { text: string } => {
  if (!isObject(v)) return invalid(v, 'struct Part');
  if (!('text' in v)) return 'missing field `text`';
  if (typeof v.text !== 'string') return invalid(v.text, 'a string');
  return { text: v.text };
};

/** Type errors are reported in the input's key order, then missing fields in declaration order. */
const parseMessage = (v: unknown): MessageParse => {
  if (!isObject(v)) return { ok: false, error: invalid(v, 'struct Message') };
  const parts: { text: string }[] = [];
  for (const [key, value] of Object.entries(v)) {
    if ((key === 'messageId' || key === 'role') && typeof value !== 'string') {
      return { ok: false, error: invalid(value, 'a string') };
    }
    if (key === 'contextId' && value !== null && typeof value !== 'string') {
      return { ok: false, error: invalid(value, 'a string') };
    }
    if (key === 'parts') {
      if (!Array.isArray(value)) return { ok: false, error: invalid(value, 'a sequence') };
      for (const item of value) {
        const part = parsePart(item);
        if (typeof part === 'string') return { ok: false, error: part };
        parts.push(part);
      }
    }
  }
  for (const field of ['messageId', 'role', 'parts']) {
    if (!(field in v)) return { ok: false, error: `missing field \`${field}\`` };
  }
  const message: A2AMessage = { messageId: v.messageId as string, role: v.role as string, parts };
  if (typeof v.contextId === 'string') message.contextId = v.contextId;
  if (typeof v.taskId === 'string') message.taskId = v.taskId;
  return { ok: true, message };
};

/** The message is `params.message` when params has that key, otherwise `params` itself. */
export const parseMessageParams = (params: unknown): MessageParse =>
  parseMessage(isObject(params) && 'message' in params ? params.message : params);

/** The text the task receives: its parts' text joined. */
export const messageText = (m: A2AMessage): string => m.parts.map((p) => p.text).join('');
