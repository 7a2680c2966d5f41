/**
 * The state an AI SDK chat keeps, as plain fields: what `@ai-sdk/react`'s `Chat` keeps in React
 * state, for the tests' chat clients without React (in Node, and bundled into a Chromium page).
 */
import type { ChatState, UIMessage } from 'ai';

export class PlainChatState implements ChatState<UIMessage> {
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
