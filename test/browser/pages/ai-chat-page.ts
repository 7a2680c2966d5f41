/**
 * Bundled by esbuild into a test page: the AI SDK's chat client (`ai`, unchanged) in the browser, as
 * `useChat({id, messages, resume: true})` sets it up on mount: the chat's history from the gateway,
 * then `resumeStream()`. `?api=…&chat=…` name the surface and the chat; `window.aiChat` drives it.
 */
import { AbstractChat, DefaultChatTransport, type UIMessage } from 'ai';
import { PlainChatState } from '../../support/plain-chat-state.js';

/** Page-side globals (this file is bundled for Chromium; the project's lib has no DOM). */
declare const window: Record<string, unknown>;
declare const location: { search: string };

class PageChat extends AbstractChat<UIMessage> {
  constructor(id: string, api: string, messages: UIMessage[]) {
    const state = new PlainChatState();
    state.messages = messages;
    super({ id, state, transport: new DefaultChatTransport({ api }) });
  }
}

const params = new URLSearchParams(location.search);
const api = params.get('api') ?? '';
const chatId = params.get('chat') ?? '';

const mounted = (async () => {
  const history = (await (
    await fetch(`${api}/${encodeURIComponent(chatId)}/messages`)
  ).json()) as UIMessage[];
  const chat = new PageChat(chatId, api, history);
  // What useChat's `resume: true` does on mount: follow the chat's active turn, if any.
  const resumed = chat.resumeStream();
  return { chat, resumed, history };
})();

window.aiChat = {
  /** Resolves once the mount's resume settled (at once when no turn was active). */
  ready: async (): Promise<void> => {
    await (
      await mounted
    ).resumed;
  },
  send: async (text: string): Promise<void> => {
    const { chat } = await mounted;
    void chat.sendMessage({ text });
  },
  snapshot: async () => {
    const { chat, history } = await mounted;
    return { messages: chat.messages, status: chat.status, history };
  },
};
