/**
 * The AI SDK's own chat client in Node, unchanged: `ai` exports `AbstractChat` but no concrete
 * `Chat` (`@ai-sdk/react`'s is a thin subclass holding React state), so this is the same subclass
 * with plain state (notes/ai-sdk-client.md §3).
 */
import { AbstractChat, DefaultChatTransport, type ChatInit, type UIMessage } from 'ai';
import { PlainChatState } from '../../support/plain-chat-state.js';

export class NodeChat extends AbstractChat<UIMessage> {
  constructor({ messages = [], ...init }: ChatInit<UIMessage>) {
    const state = new PlainChatState();
    state.messages = messages;
    super({ ...init, state });
  }

  snapshot(): { messages: UIMessage[]; status: string; error: Error | undefined } {
    return { messages: this.messages, status: this.status, error: this.error };
  }
}

/** A chat on the gateway's AI SDK surface (`api` = `{base}/ai-sdk/{capsule}/chat`). */
export const gatewayChat = (
  api: string,
  id: string,
  options: { headers?: Record<string, string>; messages?: UIMessage[]; onError?: (e: Error) => void } = {},
): NodeChat =>
  new NodeChat({
    id,
    messages: options.messages ?? [],
    transport: new DefaultChatTransport({ api, ...(options.headers ? { headers: options.headers } : {}) }),
    ...(options.onError ? { onError: options.onError } : {}),
  });
