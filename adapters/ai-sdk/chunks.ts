/**
 * The AI SDK's UI message stream ("v1", notes/ai-sdk-client.md §1): the chunks this surface writes,
 * and the parts a `UIMessage` holds once a client applied them. Only the shapes the gateway makes;
 * every field name is the SDK's.
 */

export type FinishReason = 'stop' | 'error' | 'other';

export type UiChunk =
  | { type: 'start'; messageId: string }
  | { type: 'start-step' }
  | { type: 'finish-step' }
  | { type: 'text-start'; id: string }
  | { type: 'text-delta'; id: string; delta: string }
  | { type: 'text-end'; id: string }
  | { type: 'reasoning-start'; id: string }
  | { type: 'reasoning-delta'; id: string; delta: string }
  | { type: 'reasoning-end'; id: string }
  | {
      type: 'tool-input-available';
      toolCallId: string;
      toolName: string;
      input: unknown;
      dynamic: true;
      providerExecuted: true;
    }
  | { type: 'tool-output-available'; toolCallId: string; output: unknown; providerExecuted: true }
  | { type: 'tool-output-error'; toolCallId: string; errorText: string; providerExecuted: true }
  | { type: `data-${string}`; id: string; data: unknown }
  | { type: 'error'; errorText: string }
  | { type: 'abort'; reason: string }
  | { type: 'finish'; finishReason: FinishReason };

export type UiPart =
  | { type: 'step-start' }
  /** `state` absent: a user's text, as the client sends it. */
  | { type: 'text'; text: string; state?: 'streaming' | 'done' }
  | { type: 'reasoning'; id: string; text: string; state: 'streaming' | 'done' }
  | {
      type: 'dynamic-tool';
      toolName: string;
      toolCallId: string;
      state: 'input-available' | 'output-available' | 'output-error';
      input: unknown;
      output?: unknown;
      errorText?: string;
      providerExecuted: true;
    }
  | { type: `data-${string}`; id: string; data: unknown };

export interface UiMessage {
  id: string;
  role: 'user' | 'assistant';
  parts: UiPart[];
}

/** The data parts this surface adds (`data-<name>`): what the log says beside the model's output. */
export const DATA_PART = {
  /** Frames of this turn may be missing here (a loss fact): `{reason, offset, count?}`. */
  loss: 'data-murmur-loss',
  /** An artifact that is no tool's output (a hook's): `{name, content}`. */
  artifact: 'data-murmur-artifact',
  /** The capsule waits for input (`input-required`): `{prompt, state}`. */
  input: 'data-murmur-input',
} as const;

/**
 * Fold one chunk into a message's parts as the SDK's client does (process-ui-message-stream.ts), so
 * the history endpoint answers what a client that streamed the turn holds.
 */
export const applyChunk = (
  parts: UiPart[],
  open: Map<string, { state?: 'streaming' | 'done'; text: string }>,
  chunk: UiChunk,
): void => {
  switch (chunk.type) {
    case 'start-step':
      parts.push({ type: 'step-start' });
      return;
    case 'text-start': {
      const part = { type: 'text' as const, text: '', state: 'streaming' as const };
      open.set(`t${chunk.id}`, part);
      parts.push(part);
      return;
    }
    case 'reasoning-start': {
      const part = { type: 'reasoning' as const, id: chunk.id, text: '', state: 'streaming' as const };
      open.set(`r${chunk.id}`, part);
      parts.push(part);
      return;
    }
    case 'text-delta':
    case 'reasoning-delta': {
      const part = open.get(`${chunk.type === 'text-delta' ? 't' : 'r'}${chunk.id}`);
      if (part && 'text' in part) part.text += chunk.delta;
      return;
    }
    case 'text-end':
    case 'reasoning-end': {
      const key = `${chunk.type === 'text-end' ? 't' : 'r'}${chunk.id}`;
      const part = open.get(key);
      if (part) part.state = 'done';
      open.delete(key);
      return;
    }
    case 'tool-input-available':
      parts.push({
        type: 'dynamic-tool',
        toolName: chunk.toolName,
        toolCallId: chunk.toolCallId,
        state: 'input-available',
        input: chunk.input,
        providerExecuted: true,
      });
      return;
    case 'tool-output-available':
    case 'tool-output-error': {
      const part = parts.find((p) => p.type === 'dynamic-tool' && p.toolCallId === chunk.toolCallId);
      if (!part || part.type !== 'dynamic-tool') return;
      if (chunk.type === 'tool-output-available') {
        part.state = 'output-available';
        part.output = chunk.output;
      } else {
        part.state = 'output-error';
        part.errorText = chunk.errorText;
      }
      return;
    }
    case 'start':
    case 'finish-step':
    case 'error':
    case 'abort':
    case 'finish':
      return;
    default: {
      // data-<name>: the same type and id replaces the earlier part's data.
      const same = parts.find((p) => p.type === chunk.type && 'id' in p && p.id === chunk.id);
      if (same && 'data' in same) same.data = chunk.data;
      else parts.push({ type: chunk.type, id: chunk.id, data: chunk.data });
    }
  }
};
