/**
 * The AI SDK's own chat client (`ai`'s AbstractChat with DefaultChatTransport, unchanged) against the
 * gateway in front of a simulated capsule: a turn's stream, tools and thinking on every release
 * line, a failed task, queued messages, history, resume and stop.
 */
import { once } from 'node:events';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { UIMessage } from 'ai';
import type { SimRelease } from '../../../src/simulator/release-line.js';
import { testRedisUrl } from '../../support/redis.js';
import { DefaultChatTransport } from 'ai';
import { gatewayChat, NodeChat } from './node-chat.js';
import { chunksOf, history, plain, startChatRig, until, userMessage, type ChatRig } from './rig.js';

let rigs: ChatRig[] = [];
afterEach(async () => {
  await Promise.all(rigs.map((r) => r.close()));
  rigs = [];
});

let redisUrl: string | undefined;
const rig = async (options: Parameters<typeof startChatRig>[0] = {}): Promise<ChatRig> => {
  const r = await startChatRig({ redisUrl, ...options });
  rigs.push(r);
  return r;
};

const assistants = (messages: UIMessage[]) => messages.filter((m) => m.role === 'assistant');

describe.each(['memory', 'redis'] as const)('useChat on the gateway (%s store)', (store) => {
  beforeAll(() => {
    redisUrl = store === 'redis' ? testRedisUrl() : undefined;
    if (store === 'redis' && !redisUrl && process.env.REQUIRE_REDIS === '1')
      throw new Error('Redis required');
  });

  it('sends a message and streams the reply; history is what the client holds', async () => {
    const { api, gw, capsule } = await rig();
    const chat = gatewayChat(api, 'chat-a');
    await chat.sendMessage({ text: 'hello there' });
    const { messages, status } = chat.snapshot();
    expect(status).toBe('ready');
    expect(messages).toHaveLength(2);
    const reply = messages[1]!;
    expect(reply.id).toMatch(/^msg-/);
    expect(reply.parts).toEqual([
      { type: 'step-start' },
      expect.objectContaining({ type: 'reasoning', text: 'Reading the message', state: 'done' }),
      expect.objectContaining({ type: 'text', text: 'Echo: hello there', state: 'done' }),
    ]);
    // The history a reload shows: user ids as the client made them, the assistant id from `start`.
    expect(await history(api, 'chat-a')).toEqual(plain(messages));
    // A second turn continues the same chat.
    await chat.sendMessage({ text: 'again' });
    expect(await history(api, 'chat-a')).toEqual(plain(chat.snapshot().messages));
    expect(assistants(chat.snapshot().messages)).toHaveLength(2);
    // The chat is a capsule context: the same conversation reads on Flue.
    const flue = (await (await fetch(`${gw.baseUrl}/flue/${capsule}/chat-a`)).json()) as {
      messages: { role: string; parts: { type: string; text?: string }[] }[];
    };
    expect(flue.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(flue.messages[1]!.parts.find((p) => p.type === 'text')?.text).toBe('Echo: hello there');
  });

  it('a BeeOS task sent into the chat’s context is a turn of the chat, and its task reads the reply', async () => {
    const { api, gw, capsule } = await rig();
    const chat = gatewayChat(api, 'shared');
    await chat.sendMessage({ text: 'from useChat' });
    const beeos = `${gw.baseUrl}/api/v1/agents/${capsule}/tasks`;
    const created = (await (
      await fetch(beeos, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'from BeeOS', context_id: 'shared' }),
      })
    ).json()) as { data: { task_id: string } };
    const taskId = created.data.task_id;
    const status = async () =>
      ((await (await fetch(`${beeos}/${taskId}`)).json()) as { data: { status: string; result?: string } })
        .data;
    await until(async () => (await status()).status === 'completed');
    expect((await status()).result).toBe('Echo: from BeeOS');
    const messages = await history(api, 'shared');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(messages[2]!.parts).toEqual([{ type: 'text', text: 'from BeeOS' }]);
    expect(messages[3]!.parts.at(-1)).toMatchObject({ type: 'text', text: 'Echo: from BeeOS' });
  });

  it('answers the turn as the UI message stream, from start to finish and [DONE]', async () => {
    const { api } = await rig();
    const res = await fetch(api, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'raw', messages: [userMessage('u1', 'hi')], trigger: 'submit-message' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const chunks = await chunksOf(res);
    const start = chunks[0]!;
    expect(start).toEqual({ type: 'start', messageId: expect.stringMatching(/^msg-/) });
    const r = chunks.find((c) => c.type === 'reasoning-start')!.id;
    const t = chunks.find((c) => c.type === 'text-start')!.id;
    expect(chunks).toEqual([
      start,
      { type: 'start-step' },
      { type: 'reasoning-start', id: r },
      { type: 'reasoning-delta', id: r, delta: 'Reading the message' },
      { type: 'reasoning-end', id: r },
      { type: 'text-start', id: t },
      { type: 'text-delta', id: t, delta: 'Echo:' },
      { type: 'text-delta', id: t, delta: ' hi' },
      { type: 'text-end', id: t },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ]);
    expect((await history(api, 'raw')).map((m) => m.id)).toEqual(['u1', start.messageId]);
  });

  it('a transport that sends only the new message ({id, message}) works the same', async () => {
    const { api } = await rig();
    const chat = new NodeChat({
      id: 'last-only',
      transport: new DefaultChatTransport({
        api,
        prepareSendMessagesRequest: ({ id, messages }) => ({ body: { id, message: messages.at(-1) } }),
      }),
    });
    await chat.sendMessage({ text: 'one' });
    await chat.sendMessage({ text: 'two' });
    expect(assistants(chat.snapshot().messages).map((m) => m.parts.at(-1))).toEqual([
      expect.objectContaining({ text: 'Echo: one' }),
      expect.objectContaining({ text: 'Echo: two' }),
    ]);
    expect(await history(api, 'last-only')).toEqual(plain(chat.snapshot().messages));
  });

  it('a failed task ends in an error chunk: the chat is in error with its reason', async () => {
    const { api } = await rig();
    const chat = gatewayChat(api, 'chat-fail', { onError: () => undefined });
    await chat.sendMessage({ text: '#sim {"fail":"the tool broke","chunks":1}' });
    expect(chat.snapshot().status).toBe('error');
    expect(chat.snapshot().error?.message).toBe('the tool broke');
  });

  it('messages to a busy capsule wait in the queue and each gets its own reply, in order', async () => {
    const { api } = await rig();
    const one = gatewayChat(api, 'busy-1');
    const two = gatewayChat(api, 'busy-2');
    await Promise.all([one.sendMessage({ text: '#sim {"chunks":5}' }), two.sendMessage({ text: 'second' })]);
    const text = (chat: typeof one) =>
      chat
        .snapshot()
        .messages.at(-1)!
        .parts.filter((p) => p.type === 'text')
        .map((p) => (p as { text: string }).text)
        .join('');
    expect(text(one)).toBe('chunk 1 chunk 2 chunk 3 chunk 4 chunk 5');
    expect(text(two)).toBe('Echo: second');
  });

  it('a message id sent again is refused (409): a capsule conversation is not rewritten', async () => {
    const { api } = await rig();
    const chat = gatewayChat(api, 'twice');
    await chat.sendMessage({ text: 'one' });
    const sent = chat.snapshot().messages[0]!;
    const res = await fetch(api, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'twice', messages: [sent], trigger: 'submit-message', messageId: sent.id }),
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      error: {
        code: 'message_exists',
        message:
          'this message was sent already; send edits as a new message (a capsule keeps its own conversation)',
      },
    });
    expect(await history(api, 'twice')).toHaveLength(2);
  });

  it('resume: 204 when idle; a reloaded client follows the running turn; stop ends it', async () => {
    const { api, sim } = await rig();
    const idle = await fetch(`${api}/held/stream`);
    expect(idle.status).toBe(204);
    const first = gatewayChat(api, 'held');
    const running = once(sim, 'run');
    const sending = first.sendMessage({ text: '#sim {"hold":true}' });
    // Running: the capsule took the message, and the client has the turn's `start`.
    await running;
    await until(() => first.snapshot().messages.length === 2);
    await first.stop(); // the client goes away; the turn goes on at the capsule
    await sending;
    // A reload: history from the gateway, then the resumed stream of the active turn.
    const reloaded = gatewayChat(api, 'held', { messages: await history(api, 'held') });
    expect(reloaded.snapshot().messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const resuming = reloaded.resumeStream();
    const stop = await fetch(`${api}/held/stop`, { method: 'POST' });
    expect(stop.status).toBe(200);
    expect(await stop.json()).toEqual({ stopped: true });
    await resuming;
    const after = reloaded.snapshot().messages;
    expect(after.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(after[1]!.id).toBe(first.snapshot().messages[1]!.id);
    expect(await history(api, 'held')).toEqual(plain(after));
    expect((await fetch(`${api}/held/stream`)).status).toBe(204);
    expect(await fetch(`${api}/held/stop`, { method: 'POST' }).then((r) => r.json())).toEqual({
      stopped: false,
    });
  });
});

describe('tool calls and thinking on every release line', () => {
  const lines: SimRelease[] = ['spec', '0.4', '0.5', '0.6', '1.0'];
  it.each(lines)('release %s', async (release) => {
    const { api } = await rig({ sim: { release } });
    const chat = gatewayChat(api, `tools-${release}`);
    await chat.sendMessage({ text: '#sim {"tools":2,"thinking":1,"chunks":2}' });
    const reply = chat.snapshot().messages.at(-1)!;
    const tools = reply.parts.filter((p) => p.type === 'dynamic-tool');
    expect(tools).toHaveLength(2);
    for (const tool of tools)
      expect(tool).toMatchObject({ state: 'output-available', providerExecuted: true, toolName: 'bash' });
    expect(reply.parts.filter((p) => p.type === 'reasoning')).toHaveLength(1);
    expect(reply.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([
      'chunk 1 chunk 2',
    ]);
    // A new inference turn after the tools is a new step.
    expect(reply.parts.filter((p) => p.type === 'step-start')).toHaveLength(2);
    expect(await history(api, `tools-${release}`)).toEqual(plain(chat.snapshot().messages));

    const failing = gatewayChat(api, `tool-error-${release}`);
    await failing.sendMessage({ text: '#sim {"tools":1,"toolError":true}' });
    const tool = failing
      .snapshot()
      .messages.at(-1)!
      .parts.find((p) => p.type === 'dynamic-tool');
    expect(tool).toMatchObject({ state: 'output-error', errorText: expect.any(String) });
  });
});
