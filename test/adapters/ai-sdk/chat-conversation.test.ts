/**
 * An AI SDK chat is a capsule context, readable on every surface that reads conversations: with the
 * real `ai` client (AbstractChat + DefaultChatTransport) sending the turns, a BeeOS client lists the
 * chat as its conversation `chat_<chatId>`, reads its messages and events (with `since`), follows a
 * later turn live and posts a turn the chat's history then shows; Flue reads the same context. Another
 * owner gets BeeOS's exact not-found, also for a chat of its own with the same id.
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { UIMessage } from 'ai';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { readSse, type SseEvent } from '../beeos/support/sse-client.js';
import { testRedisUrl } from '../../support/redis.js';
import { gatewayChat } from './node-chat.js';
import { history, startChatRig, until, type ChatRig } from './rig.js';

const KEY_ALICE = `oag_${'a1'.repeat(32)}`;
const KEY_BOB = `oag_${'b2'.repeat(32)}`;
const sha = (k: string) => createHash('sha256').update(k).digest('hex');
const ALICE = { authorization: `Bearer ${KEY_ALICE}` };
const BOB = { authorization: `Bearer ${KEY_BOB}` };

let rigs: ChatRig[] = [];
afterEach(async () => {
  await Promise.all(rigs.map((r) => r.close()));
  rigs = [];
});

let redisUrl: string | undefined;
const rig = async (): Promise<ChatRig> => {
  const r = await startChatRig({
    redisUrl,
    config: {
      apiKeys: [
        { sha256: sha(KEY_ALICE), owner: 'alice' },
        { sha256: sha(KEY_BOB), owner: 'bob' },
      ],
    },
  });
  rigs.push(r);
  return r;
};

interface Listed {
  conversations: Record<string, unknown>[];
  next_since?: string;
}
interface Messages {
  messages: Envelope[];
  latest_offset: number;
  has_more: boolean;
}

const getData = async <T>(url: string, headers: Record<string, string>): Promise<T> => {
  const res = await fetch(url, { headers });
  const body = (await res.json()) as { success: boolean; data: T };
  if (res.status !== 200 || !body.success) throw new Error(`${url}: ${res.status} ${JSON.stringify(body)}`);
  return body.data;
};

/** An SSE stream read in the background: its events so far, and a wait for one that matches. */
const openEvents = async (url: string, headers: Record<string, string>) => {
  const ac = new AbortController();
  const res = await fetch(url, { headers, signal: ac.signal });
  expect(res.status).toBe(200);
  const events: SseEvent[] = [];
  const waiters: { pred: (e: SseEvent) => boolean; resolve: () => void }[] = [];
  const reading = (async () => {
    try {
      for await (const ev of readSse(res)) {
        if (ev.comment !== undefined && ev.data === '') continue;
        events.push(ev);
        for (const w of [...waiters]) if (w.pred(ev)) w.resolve();
      }
    } catch {
      // aborted at close
    }
  })();
  return {
    events,
    envelopes: () => events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope),
    /** Resolves once an event matching `pred` arrived (at once if one already did). */
    waitFor: (pred: (e: SseEvent) => boolean) =>
      new Promise<void>((resolve) => {
        if (events.some(pred)) return resolve();
        waiters.push({ pred, resolve });
      }),
    close: async () => {
      ac.abort();
      await reading;
    },
  };
};

const isTerminalReply = (e: Envelope): boolean => e.type === 'agent_reply' && e.state === 'completed';
const terminalReplyOf = (text: string) => (ev: SseEvent) =>
  ev.event === 'message' &&
  isTerminalReply(JSON.parse(ev.data) as Envelope) &&
  (JSON.parse(ev.data) as Envelope).body === text;

/** What a chat's turns read as on BeeOS: each user text, then its reply's final body and thinking. */
const turnsOf = (envelopes: Envelope[]) => {
  const users = envelopes.filter((e) => e.type === 'chat_message');
  return users.map((u) => {
    const reply = envelopes.find((e) => isTerminalReply(e) && e.in_reply_to === u.message_id);
    return {
      user: (u.payload as { text: string }).text,
      publisher: u.publisher_id,
      reply: reply?.body,
      thinking: reply?.parts?.filter((p) => p.type === 'thinking').map((p) => p.text),
    };
  });
};

/** The same turns as the AI SDK's history holds them. */
const chatTurns = (messages: UIMessage[]) => {
  const out: { user: string; reply: string }[] = [];
  for (let i = 0; i + 1 < messages.length; i += 2) {
    const text = (m: UIMessage) => m.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    out.push({ user: text(messages[i]!), reply: text(messages[i + 1]!) });
  }
  return out;
};

describe.each(['memory', 'redis'] as const)('an AI SDK chat as a BeeOS conversation (%s store)', (store) => {
  beforeAll(() => {
    redisUrl = store === 'redis' ? testRedisUrl() : undefined;
    if (store === 'redis' && !redisUrl && process.env.REQUIRE_REDIS === '1')
      throw new Error('Redis required');
  });

  it('lists and reads the chat’s turns exactly, resumes with since and follows a third turn live', async () => {
    const { api, gw, capsule } = await rig();
    const agent = `${gw.baseUrl}/api/v1/agents/${capsule}`;
    const chat = gatewayChat(api, 'trip', { headers: ALICE });
    await chat.sendMessage({ text: 'first question' });
    await chat.sendMessage({ text: 'second question' });

    // Listed among the owner's conversations, under the chat's id.
    const listed = await getData<Listed>(`${agent}/conversations`, ALICE);
    expect(listed.conversations).toHaveLength(1);
    const conversation = listed.conversations[0]!;
    expect(conversation).toEqual({
      conversation_id: 'chat_trip',
      agent_id: capsule,
      context_id: 'trip',
      state: 'active',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(listed.next_since).toBeUndefined();
    expect(await getData(`${agent}/conversations/chat_trip`, ALICE)).toEqual(conversation);

    // Both turns, user and assistant, exactly as the chat holds them.
    const read = await getData<Messages>(`${agent}/conversations/chat_trip/messages`, ALICE);
    expect(read.has_more).toBe(false);
    expect(turnsOf(read.messages)).toEqual([
      {
        user: 'first question',
        publisher: 'user:alice',
        reply: 'Echo: first question',
        thinking: ['Reading the message'],
      },
      {
        user: 'second question',
        publisher: 'user:alice',
        reply: 'Echo: second question',
        thinking: ['Reading the message'],
      },
    ]);
    expect(turnsOf(read.messages).map(({ user, reply }) => ({ user, reply }))).toEqual(
      chatTurns(chat.snapshot().messages),
    );

    // The events replay the same envelopes; `since` resumes after the first turn.
    const replay = await openEvents(`${agent}/conversations/chat_trip/events`, ALICE);
    await replay.waitFor((e) => e.event === 'replay_complete');
    await replay.close();
    expect(replay.envelopes()).toEqual(read.messages);
    const firstEnd = read.messages.find((e) => isTerminalReply(e) && e.body === 'Echo: first question')!;
    const resumed = await openEvents(
      `${agent}/conversations/chat_trip/events?since=${firstEnd.offset}`,
      ALICE,
    );
    await resumed.waitFor((e) => e.event === 'replay_complete');
    await resumed.close();
    expect(resumed.envelopes()).toEqual(read.messages.filter((e) => e.offset > firstEnd.offset));

    // Live: a stream opened at the head follows the chat's third turn.
    const live = await openEvents(
      `${agent}/conversations/chat_trip/events?since=${read.latest_offset}`,
      ALICE,
    );
    await live.waitFor((e) => e.event === 'replay_complete');
    await chat.sendMessage({ text: 'third question' });
    await live.waitFor(terminalReplyOf('Echo: third question'));
    await live.close();
    expect(turnsOf(live.envelopes())).toEqual([
      {
        user: 'third question',
        publisher: 'user:alice',
        reply: 'Echo: third question',
        thinking: ['Reading the message'],
      },
    ]);
    expect(live.events.some((e) => e.event === 'end')).toBe(false); // a conversation never auto-ends

    // Flue reads the same context: the three turns, user and assistant text.
    const flue = await fetch(`${gw.baseUrl}/flue/${capsule}/trip`, { headers: ALICE });
    expect(flue.status).toBe(200);
    const flueMessages = (
      (await flue.json()) as { messages: { role: string; parts: { type: string; text?: string }[] }[] }
    ).messages;
    expect(
      flueMessages.map((m) => ({
        role: m.role,
        text: m.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join(''),
      })),
    ).toEqual(
      ['first question', 'second question', 'third question'].flatMap((q) => [
        { role: 'user', text: q },
        { role: 'assistant', text: `Echo: ${q}` },
      ]),
    );
  });

  it('a turn posted to the conversation on BeeOS is a turn of the chat', async () => {
    const { api, gw, capsule } = await rig();
    const agent = `${gw.baseUrl}/api/v1/agents/${capsule}`;
    const chat = gatewayChat(api, 'both-ways', { headers: ALICE });
    await chat.sendMessage({ text: 'from useChat' });

    const posted = await fetch(`${agent}/conversations/chat_both-ways/messages`, {
      method: 'POST',
      headers: { ...ALICE, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'from BeeOS' }),
    });
    expect(posted.status).toBe(202);
    const { data } = (await posted.json()) as { data: { message_id: string } };

    // The chat's history (what a reload shows) holds it and its reply.
    await until(async () => {
      const m = await history(api, 'both-ways', ALICE);
      return m.length === 4 && m[3]!.parts.some((p) => p.type === 'text' && p.text === 'Echo: from BeeOS');
    });
    const messages = await history(api, 'both-ways', ALICE);
    expect(chatTurns(messages)).toEqual([
      { user: 'from useChat', reply: 'Echo: from useChat' },
      { user: 'from BeeOS', reply: 'Echo: from BeeOS' },
    ]);
    expect(messages[2]!.id).toBe(data.message_id);

    // BeeOS reads it as its own turn, and the chat's next message follows it.
    await chat.sendMessage({ text: 'back in useChat' });
    const read = await getData<Messages>(`${agent}/conversations/chat_both-ways/messages`, ALICE);
    expect(turnsOf(read.messages).map(({ user, reply }) => ({ user, reply }))).toEqual([
      { user: 'from useChat', reply: 'Echo: from useChat' },
      { user: 'from BeeOS', reply: 'Echo: from BeeOS' },
      { user: 'back in useChat', reply: 'Echo: back in useChat' },
    ]);
    expect(
      read.messages.find((e) => e.type === 'chat_message' && e.message_id === data.message_id),
    ).toBeDefined();
  });

  it('a context used before the chat’s first message: the conversation shows what the chat shows', async () => {
    const { api, gw, capsule } = await rig();
    const agent = `${gw.baseUrl}/api/v1/agents/${capsule}`;
    // A Flue message to the conversation the chat then joins (the chat's history holds it too).
    const admitted = await fetch(`${gw.baseUrl}/flue/${capsule}/joined`, {
      method: 'POST',
      headers: { ...ALICE, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'user', body: 'from Flue first' }),
    });
    expect(admitted.status).toBe(202);
    const chat = gatewayChat(api, 'joined', { headers: ALICE });
    await chat.sendMessage({ text: 'then useChat' });
    await until(async () => chatTurns(await history(api, 'joined', ALICE)).length === 2);
    const expected = chatTurns(await history(api, 'joined', ALICE));
    expect(expected).toEqual([
      { user: 'from Flue first', reply: 'Echo: from Flue first' },
      { user: 'then useChat', reply: 'Echo: then useChat' },
    ]);
    const read = await getData<Messages>(`${agent}/conversations/chat_joined/messages`, ALICE);
    expect(turnsOf(read.messages).map(({ user, reply }) => ({ user, reply }))).toEqual(expected);
    const replay = await openEvents(`${agent}/conversations/chat_joined/events`, ALICE);
    await replay.waitFor((e) => e.event === 'replay_complete');
    await replay.close();
    expect(replay.envelopes()).toEqual(read.messages);
    expect(replay.events.some((e) => e.event === 'backfill_truncated')).toBe(false);
  });

  it('another owner gets BeeOS’s exact not-found; its own chat of the same id is its own', async () => {
    const { api, gw, capsule } = await rig();
    const agent = `${gw.baseUrl}/api/v1/agents/${capsule}`;
    const mine = gatewayChat(api, 'same-id', { headers: ALICE });
    await mine.sendMessage({ text: 'alice writes' });
    const before = await getData<Messages>(`${agent}/conversations/chat_same-id/messages`, ALICE);

    const notFound = async (res: Response) => {
      const rid = res.headers.get('x-request-id');
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({
        success: false,
        error: {
          type: 'not_found_error',
          code: 'agent_not_found',
          message: 'conversation not found: chat_same-id',
          request_id: rid,
        },
      });
    };
    const base = `${agent}/conversations/chat_same-id`;
    await notFound(await fetch(base, { headers: BOB }));
    await notFound(await fetch(`${base}/messages`, { headers: BOB }));
    await notFound(await fetch(`${base}/events`, { headers: BOB }));
    await notFound(
      await fetch(`${base}/messages`, {
        method: 'POST',
        headers: { ...BOB, 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'let me in' }),
      }),
    );
    await notFound(await fetch(base, { method: 'DELETE', headers: BOB }));
    // `GET /v1/follow` knows the conversation too: the owner's, and for another owner the 404 of
    // a stream that does not exist.
    const key = `beeos:${capsule}/conversations/chat_same-id`;
    const follow = (headers: Record<string, string>) =>
      fetch(`${gw.baseUrl}/v1/follow?stream=${encodeURIComponent(`${key}@-1`)}&live=long-poll`, { headers });
    const followed = (await (await follow(ALICE)).json()) as { events: { event: string; data: Envelope }[] };
    expect(followed.events.filter((e) => e.event === 'message').map((e) => e.data)).toEqual(before.messages);
    const foreign = await follow(BOB);
    expect(foreign.status).toBe(404);
    expect(await foreign.json()).toEqual({ error: { code: 'not_found', message: `no such stream: ${key}` } });
    // The same answer as an id no one has.
    const unknown = await fetch(`${agent}/conversations/chat_nobody`, { headers: ALICE });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('agent_not_found');
    expect((await getData<Listed>(`${agent}/conversations`, BOB)).conversations).toEqual([]);

    // Bob's chat of the same id is another context: each owner's stream shows only its own turns,
    // also while both are followed live at once.
    const aliceLive = await openEvents(`${base}/events`, ALICE);
    const bobChat = gatewayChat(api, 'same-id', { headers: BOB });
    await bobChat.sendMessage({ text: 'bob writes' });
    const bobLive = await openEvents(`${base}/events`, BOB);
    await bobLive.waitFor(terminalReplyOf('Echo: bob writes'));
    await mine.sendMessage({ text: 'alice again' });
    await aliceLive.waitFor(terminalReplyOf('Echo: alice again'));
    await bobChat.sendMessage({ text: 'bob again' });
    await bobLive.waitFor(terminalReplyOf('Echo: bob again'));
    await Promise.all([aliceLive.close(), bobLive.close()]);
    expect(turnsOf(aliceLive.envelopes()).map((t) => [t.user, t.publisher, t.reply])).toEqual([
      ['alice writes', 'user:alice', 'Echo: alice writes'],
      ['alice again', 'user:alice', 'Echo: alice again'],
    ]);
    expect(turnsOf(bobLive.envelopes()).map((t) => [t.user, t.publisher, t.reply])).toEqual([
      ['bob writes', 'user:bob', 'Echo: bob writes'],
      ['bob again', 'user:bob', 'Echo: bob again'],
    ]);
    // Bob's post reached nothing of Alice's.
    const after = await getData<Messages>(`${agent}/conversations/chat_same-id/messages`, ALICE);
    expect(turnsOf(after.messages).map((t) => t.user)).toEqual(['alice writes', 'alice again']);
    expect(after.messages.slice(0, before.messages.length)).toEqual(before.messages);
  });

  it('a chat’s conversation is not deleted on BeeOS; list pages and bad list queries', async () => {
    const { api, gw, capsule } = await rig();
    const agent = `${gw.baseUrl}/api/v1/agents/${capsule}`;
    const created = await fetch(`${agent}/conversations`, { method: 'POST', headers: ALICE });
    expect(created.status).toBe(201);
    const minted = ((await created.json()) as { data: { conversation_id: string } }).data.conversation_id;
    await gatewayChat(api, 'listed', { headers: ALICE }).sendMessage({ text: 'hi' });

    const del = await fetch(`${agent}/conversations/chat_listed`, { method: 'DELETE', headers: ALICE });
    expect(del.status).toBe(409);
    expect(await del.json()).toEqual({
      success: false,
      error: {
        type: 'conflict_error',
        code: 'conflict',
        message: 'this conversation is an AI SDK chat: it cannot be deleted',
        request_id: del.headers.get('x-request-id'),
      },
    });
    expect((await getData<{ state: string }>(`${agent}/conversations/chat_listed`, ALICE)).state).toBe(
      'active',
    );

    // Oldest first, one a page, `next_since` while more follow.
    const first = await getData<Listed>(`${agent}/conversations?limit=1`, ALICE);
    expect(first.conversations.map((c) => c.conversation_id)).toEqual([minted]);
    expect(first.next_since).toMatch(/^\d+$/);
    const second = await getData<Listed>(`${agent}/conversations?limit=1&since=${first.next_since}`, ALICE);
    expect(second.conversations.map((c) => c.conversation_id)).toEqual(['chat_listed']);
    expect(second.next_since).toBeUndefined();

    // A deleted minted one is listed only as closed.
    expect(
      (await fetch(`${agent}/conversations/${minted}`, { method: 'DELETE', headers: ALICE })).status,
    ).toBe(204);
    const ids = async (q: string) =>
      (await getData<Listed>(`${agent}/conversations${q}`, ALICE)).conversations.map(
        (c) => c.conversation_id,
      );
    expect(await ids('')).toEqual(['chat_listed']);
    expect(await ids('?state=open')).toEqual(['chat_listed']);
    expect(await ids('?state=closed')).toEqual([minted]);
    expect(await ids('?state=all')).toEqual([minted, 'chat_listed']);

    // A chat id is any string the AI SDK takes: its conversation's id is percent-encoded in a path.
    await gatewayChat(api, 'a chat/with ünïcode', { headers: ALICE }).sendMessage({ text: 'odd id' });
    const odd = `${agent}/conversations/${encodeURIComponent('chat_a chat/with ünïcode')}`;
    expect(await getData(odd, ALICE)).toMatchObject({
      conversation_id: 'chat_a chat/with ünïcode',
      context_id: 'a chat/with ünïcode',
    });
    const oddRead = await getData<Messages>(`${odd}/messages`, ALICE);
    expect(turnsOf(oddRead.messages).map((t) => [t.user, t.reply])).toEqual([['odd id', 'Echo: odd id']]);

    for (const [q, message] of [
      ['?state=gone', 'state must be active, open, closed or all'],
      ['?since=x', 'since must be a next_since of a previous page'],
      ['?limit=0', 'limit must be an integer from 1 to 100'],
      ['?limit=101', 'limit must be an integer from 1 to 100'],
    ] as const) {
      const res = await fetch(`${agent}/conversations${q}`, { headers: ALICE });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        success: false,
        error: {
          type: 'invalid_request_error',
          code: 'invalid_param',
          message,
          request_id: res.headers.get('x-request-id'),
        },
      });
    }
  });
});
