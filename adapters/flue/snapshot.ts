/**
 * The client-side fold of update chunks into conversation state, written to behave exactly like
 * `@flue/sdk`'s `applyConversationChunk`, so that `view=history` (which is this fold over the whole
 * projection) equals what an SDK client accumulates from `view=updates`. Mutates `state` in place.
 */
import type { FlueChunk, FlueMessage, FluePart, FlueSettlement } from './chunks.js';

export interface ConversationState {
  conversationId: string;
  messages: FlueMessage[];
  settlements: FlueSettlement[];
}

export const emptyState = (conversationId: string): ConversationState => ({
  conversationId,
  messages: [],
  settlements: [],
});

const isOpenText = (part: FluePart | undefined): boolean =>
  !!part &&
  (part.type === 'text' || part.type === 'reasoning') &&
  'state' in part &&
  part.state === 'streaming';

/**
 * The message with `id`. Ids are unique in a state (appended replaces, started skips a known id), so
 * searching from the newest end finds the same message: the one a chunk streams into is nearly
 * always the last, and from the oldest a long conversation cost a scan of all its messages per chunk.
 */
const find = (state: ConversationState, id: string): FlueMessage | undefined => {
  const { messages } = state;
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.id === id) return messages[i];
  return undefined;
};

/** Apply one chunk (§ConversationStreamChunk semantics, SDK behaviour where the spec is loose). */
export const applyChunk = (state: ConversationState, chunk: FlueChunk): void => {
  switch (chunk.type) {
    case 'conversation-reset': {
      const copy = structuredClone(chunk.snapshot);
      state.conversationId = copy.conversationId;
      state.messages = copy.messages;
      state.settlements = copy.settlements;
      return;
    }
    case 'message-appended': {
      const message = structuredClone(chunk.message);
      const i = state.messages.findIndex((m) => m.id === message.id);
      if (i < 0) state.messages.push(message);
      else state.messages[i] = message;
      return;
    }
    case 'message-started': {
      if (find(state, chunk.messageId)) return;
      state.messages.push({
        id: chunk.messageId,
        role: 'assistant',
        purpose: 'assistant',
        display: 'visible',
        ...(chunk.submissionId ? { submissionId: chunk.submissionId } : {}),
        parts: [],
      });
      return;
    }
    case 'data-part': {
      const message = find(state, chunk.messageId);
      if (!message) return;
      const type = `data-${chunk.name}` as const;
      const part: FluePart = { type, data: structuredClone(chunk.data) };
      // The SDK keeps one part per data name: a later write replaces the earlier one.
      const i = message.parts.findIndex((p) => p.type === type);
      if (i < 0) message.parts.push(part);
      else message.parts[i] = part;
      return;
    }
    case 'message-delta': {
      const message = find(state, chunk.messageId);
      if (!message) return;
      const last = message.parts[message.parts.length - 1];
      if (last && last.type === chunk.kind && isOpenText(last)) {
        (last as { text: string }).text += chunk.delta;
        return;
      }
      if (last && isOpenText(last)) (last as { state: string }).state = 'done';
      message.parts.push({ type: chunk.kind, text: chunk.delta, state: 'streaming' });
      return;
    }
    case 'tool-input': {
      const message = find(state, chunk.messageId);
      if (!message) return;
      if (message.parts.some((p) => p.type === 'dynamic-tool' && p.toolCallId === chunk.toolCallId)) return;
      const last = message.parts[message.parts.length - 1];
      if (last && isOpenText(last)) (last as { state: string }).state = 'done';
      message.parts.push({
        type: 'dynamic-tool',
        toolName: chunk.toolName,
        toolCallId: chunk.toolCallId,
        state: 'input-available',
        input: structuredClone(chunk.input),
      });
      return;
    }
    case 'tool-output':
    case 'tool-output-error': {
      const holder = state.messages.findLast((m) =>
        m.parts.some((p) => p.type === 'dynamic-tool' && p.toolCallId === chunk.toolCallId),
      );
      if (!holder) return;
      holder.parts = holder.parts.map((p) => {
        if (p.type !== 'dynamic-tool' || p.toolCallId !== chunk.toolCallId) return p;
        const { output: _o, errorText: _e, ...rest } = p;
        const next =
          chunk.type === 'tool-output'
            ? { ...rest, state: 'output-available' as const, output: structuredClone(chunk.output) }
            : { ...rest, state: 'output-error' as const, errorText: chunk.errorText };
        return chunk.durationMs !== undefined ? { ...next, durationMs: chunk.durationMs } : next;
      });
      return;
    }
    case 'message-completed': {
      const message = find(state, chunk.messageId);
      if (!message) return;
      for (const p of message.parts)
        if (p.type === 'text' || p.type === 'reasoning') (p as { state: string }).state = 'done';
      return;
    }
    case 'submission-settled': {
      const settlement: FlueSettlement = {
        submissionId: chunk.submissionId,
        outcome: chunk.outcome,
        ...(chunk.error === undefined ? {} : { error: structuredClone(chunk.error) }),
      };
      const i = state.settlements.findIndex((s) => s.submissionId === chunk.submissionId);
      if (i < 0) state.settlements.push(settlement);
      else state.settlements[i] = settlement;
      return;
    }
  }
};
