/* global document, location, sessionStorage, localStorage, URLSearchParams, crypto */
/**
 * A tiny chat page on the AI SDK surface, in plain JavaScript (no build step): it speaks the same
 * wire as `useChat` — POST a message and read the UI message stream, load the history and resume
 * the running turn on load, stop — and folds the chunks into messages as the SDK's client does.
 */
const params = new URLSearchParams(location.search);
const capsule = params.get('capsule') || 'demo-alpha';
const CHAT_STORAGE = `murmur-gateway.chat.${capsule}`;
const chatId = params.get('chat') || localStorage.getItem(CHAT_STORAGE) || `chat-${crypto.randomUUID()}`;
localStorage.setItem(CHAT_STORAGE, chatId);
const api = `/ai-sdk/${encodeURIComponent(capsule)}/chat`;
// The dashboard's key, when the gateway needs one.
const key = sessionStorage.getItem('murmur-gateway.dashboard.key');
const auth = key ? { authorization: `Bearer ${key}` } : {};

const log = document.getElementById('log');
const status = document.getElementById('status');
document.getElementById('where').textContent = `${capsule} · ${chatId}`;

/** @type {{id: string, role: string, parts: any[]}[]} */
let messages = [];
let reading = null;

const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
};

const partView = (p) => {
  switch (p.type) {
    case 'text':
      return el('div', 'part', p.text);
    case 'reasoning':
      return el('div', 'part reasoning', `thinking: ${p.text}`);
    case 'dynamic-tool': {
      const out = p.state === 'output-error' ? p.errorText : p.output;
      const tail = typeof out === 'string' ? `\n${out.slice(0, 400)}` : '';
      return el('div', 'part tool', `tool ${p.toolName} (${p.state})${tail}`);
    }
    case 'data-murmur-loss':
      return el('div', 'part loss', `frames may be missing here (${p.data.reason})`);
    case 'data-murmur-input':
      return el('div', 'part data', `the capsule asks: ${p.data.prompt ?? ''} (${p.data.state})`);
    case 'data-murmur-artifact':
      return el('div', 'part data', `${p.data.name}: ${p.data.content}`);
    default:
      return null;
  }
};

const render = () => {
  log.replaceChildren(
    ...messages.map((m) => {
      const box = el('div', `msg ${m.role}`);
      for (const p of m.parts) {
        const view = partView(p);
        if (view) box.append(view);
      }
      if (m.error) box.append(el('div', 'part error', m.error));
      return box;
    }),
  );
};

/** Fold one chunk into the assistant message it belongs to (a `start` opens or resets it). */
const apply = (state, chunk) => {
  if (chunk.type === 'start') {
    const existing = messages.find((m) => m.id === chunk.messageId);
    state.message = existing ?? { id: chunk.messageId, role: 'assistant', parts: [] };
    state.message.parts = []; // a resumed stream is a replay from the turn's start
    state.open = new Map();
    if (!existing) messages.push(state.message);
    return;
  }
  const m = state.message;
  if (!m) return;
  switch (chunk.type) {
    case 'start-step':
      m.parts.push({ type: 'step-start' });
      return;
    case 'text-start':
    case 'reasoning-start': {
      const part = { type: chunk.type === 'text-start' ? 'text' : 'reasoning', text: '' };
      state.open.set(chunk.id, part);
      m.parts.push(part);
      return;
    }
    case 'text-delta':
    case 'reasoning-delta':
      state.open.get(chunk.id).text += chunk.delta;
      return;
    case 'tool-input-available':
      m.parts.push({
        type: 'dynamic-tool',
        toolName: chunk.toolName,
        toolCallId: chunk.toolCallId,
        state: 'input-available',
      });
      return;
    case 'tool-output-available':
    case 'tool-output-error': {
      const part = m.parts.find((p) => p.toolCallId === chunk.toolCallId);
      if (!part) return;
      part.state = chunk.type === 'tool-output-error' ? 'output-error' : 'output-available';
      part.output = chunk.output;
      part.errorText = chunk.errorText;
      return;
    }
    case 'error':
      m.error = chunk.errorText;
      return;
    default:
      if (chunk.type.startsWith('data-')) {
        const same = m.parts.find((p) => p.type === chunk.type && p.id === chunk.id);
        if (same) same.data = chunk.data;
        else m.parts.push({ type: chunk.type, id: chunk.id, data: chunk.data });
      }
  }
};

/** Read a UI message stream (`data: <json>` events) until the body closes. */
const follow = async (response) => {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const state = { message: null, open: new Map() };
  let buffer = '';
  status.textContent = 'streaming';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const line = event.split('\n').find((l) => l.startsWith('data: '));
      if (!line || line === 'data: [DONE]') continue;
      apply(state, JSON.parse(line.slice(6)));
      render();
    }
  }
  status.textContent = '';
};

const guarded = (run) => {
  reading = run()
    .catch((err) => {
      status.textContent = `error: ${err.message}`;
    })
    .finally(() => {
      reading = null;
    });
};

const answer = async (response) => {
  if (response.status === 204) return;
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
  await follow(response);
};

document.getElementById('send').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = document.getElementById('text');
  const text = input.value.trim();
  if (!text || reading) return;
  input.value = '';
  const message = { id: crypto.randomUUID(), role: 'user', parts: [{ type: 'text', text }] };
  messages.push(message);
  render();
  guarded(async () => {
    const body = JSON.stringify({ id: chatId, messages: [message], trigger: 'submit-message' });
    await answer(
      await fetch(api, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body }),
    );
  });
});

document.getElementById('stop').addEventListener('click', () => {
  void fetch(`${api}/${encodeURIComponent(chatId)}/stop`, { method: 'POST', headers: auth });
});

// On load: the chat's history, then its running turn, if any (what `useChat({resume: true})` does).
guarded(async () => {
  const history = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`, { headers: auth });
  if (!history.ok) throw new Error(`${history.status} ${await history.text()}`);
  messages = await history.json();
  render();
  await answer(await fetch(`${api}/${encodeURIComponent(chatId)}/stream`, { headers: auth }));
});
