/**
 * The AI SDK's own chat client in Node, unchanged: `ai` exports `AbstractChat` but no concrete
 * `Chat` (`@ai-sdk/react`'s is a thin subclass holding React state), so this is the same subclass
 * with plain state (notes/ai-sdk-client.md §3).
 */
import { AbstractChat, DefaultChatTransport, type ChatInit, type ChatState, type UIMessage } from 'ai';

class PlainState implements ChatState<UIMessage> {
  messages: UIMessage[] = [];
  status: ChatState<UIMessage>['status'] = 'ready';
  error: Error | undefined = undefined;
  pushMessage = (m: UIMessage): void => {
    this.messages = [...this.messages, m];
  };
  popMessage = (): void => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i: number, m: UIMessage): void => {
    this.messages = this.messages.with(i, structuredClone(m));
  };
  snapshot = <T>(v: T): T => structuredClone(v);
}

export class NodeChat extends AbstractChat<UIMessage> {
  constructor({ messages = [], ...init }: ChatInit<UIMessage>) {
    const state = new PlainState();
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
