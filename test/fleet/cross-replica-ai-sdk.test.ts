/**
 * The AI SDK surface across two replicas on one real Redis, with the real `ai` client: a chat sent
 * on one replica streams and reads the same on the other; a turn started on the owner is resumed
 * after a reload on the other replica, and `stop` sent to the replica that does not own the capsule
 * cancels the running task at the capsule and ends the resumed stream. A chat is a BeeOS
 * conversation on either replica: read and followed live on the other one, posted to there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Envelope } from '../../adapters/beeos/projection.js';
import { readSse } from '../adapters/beeos/support/sse-client.js';
import { gatewayChat } from '../adapters/ai-sdk/node-chat.js';
import { history, plain, until } from '../adapters/ai-sdk/rig.js';
import type { TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { capsuleReceives, startCrossReplica, type CrossReplicaRig } from './cross-replica-rig.js';

const redisUrl = testRedisUrl();

describe.skipIf(!redisUrl)('useChat on every replica', () => {
  let rig: CrossReplicaRig;
  const api = (gw: TestGateway) => `${gw.baseUrl}/ai-sdk/${rig.capsule}/chat`;

  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!);
  }, 30_000);
  afterAll(async () => rig?.close());

  it('a chat sent on the replica that does not ingest the capsule reads the same on both', async () => {
    const chat = gatewayChat(api(rig.other), 'hop');
    await chat.sendMessage({ text: 'sent on the other replica' });
    const messages = chat.snapshot().messages;
    expect(messages.at(-1)!.parts.at(-1)).toMatchObject({
      type: 'text',
      text: 'Echo: sent on the other replica',
    });
    expect(await history(api(rig.owner), 'hop')).toEqual(plain(messages));
    expect(await history(api(rig.other), 'hop')).toEqual(plain(messages));
  });

  it('a chat sent on the owner is a BeeOS conversation on the other replica: read, followed, posted to', async () => {
    const agent = (gw: TestGateway) =>
      `${gw.baseUrl}/api/v1/agents/${rig.capsule}/conversations/chat_beeos-hop`;
    const chat = gatewayChat(api(rig.owner), 'beeos-hop');
    await chat.sendMessage({ text: 'one' });
    const read = (await (await fetch(`${agent(rig.other)}/messages`)).json()) as {
      data: { messages: Envelope[]; latest_offset: number };
    };
    const replies = (envelopes: Envelope[]) =>
      envelopes.filter((e) => e.type === 'agent_reply' && e.state === 'completed').map((e) => e.body);
    expect(read.data.messages.filter((e) => e.type === 'chat_message').map((e) => e.payload)).toEqual([
      { text: 'one' },
    ]);
    expect(replies(read.data.messages)).toEqual(['Echo: one']);

    // Followed live on the other replica while the owner runs the chat's next turn.
    const ac = new AbortController();
    const res = await fetch(`${agent(rig.other)}/events?since=${read.data.latest_offset}`, {
      signal: ac.signal,
    });
    const live: Envelope[] = [];
    const events = readSse(res);
    const next = async (pred: (e: { event: string; data: string }) => boolean) => {
      for (let ev = await events.next(); !ev.done; ev = await events.next()) {
        if (ev.value.event === 'message') live.push(JSON.parse(ev.value.data) as Envelope);
        if (pred(ev.value)) return;
      }
      throw new Error('the stream ended');
    };
    await next((e) => e.event === 'replay_complete');
    await chat.sendMessage({ text: 'two' });
    await next((e) => e.event === 'message' && replies([JSON.parse(e.data) as Envelope]).length === 1);
    ac.abort();
    await events.return(undefined).catch(() => undefined);
    expect(live.filter((e) => e.type === 'chat_message').map((e) => e.payload)).toEqual([{ text: 'two' }]);
    expect(replies(live)).toEqual(['Echo: two']);

    // A turn posted on the other replica is in the chat's history on the owner.
    const posted = await fetch(`${agent(rig.other)}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'three' }),
    });
    expect(posted.status).toBe(202);
    await until(async () => (await history(api(rig.owner), 'beeos-hop')).length === 6, 10_000);
    await until(async () => {
      const last = (await history(api(rig.owner), 'beeos-hop')).at(-1)!;
      return last.parts.some((p) => p.type === 'text' && p.text === 'Echo: three');
    }, 10_000);
  });

  it('resumed on the other replica after a reload; stopped there: the capsule cancels the task', async () => {
    const text = '#sim {"hold":true}';
    const first = gatewayChat(api(rig.owner), 'held');
    const received = capsuleReceives(rig.sim, text);
    const sending = first.sendMessage({ text });
    await received;
    await until(() => first.snapshot().messages.length === 2);
    await first.stop();
    await sending;

    const reloaded = gatewayChat(api(rig.other), 'held', { messages: await history(api(rig.other), 'held') });
    const resuming = reloaded.resumeStream();
    const stop = await fetch(`${api(rig.other)}/held/stop`, { method: 'POST' });
    expect(await stop.json()).toEqual({ stopped: true });
    await resuming;
    const messages = reloaded.snapshot().messages;
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.id).toBe(first.snapshot().messages[1]!.id);
    // The capsule wrote the task's `canceled`, and the turn is over on both replicas.
    expect(rig.sim.written.some((f) => f.event === 'status' && f.data.includes('"canceled"'))).toBe(true);
    for (const gw of [rig.owner, rig.other]) {
      expect((await fetch(`${api(gw)}/held/stream`)).status).toBe(204);
      expect(await history(api(gw), 'held')).toEqual(plain(messages));
    }
  });

  it('a message queued through the replica that does not own the capsule is in its queue at once', async () => {
    // The capsule is busy with a held task, so a second message waits in the queue.
    const text = '#sim {"hold":true}';
    const held = gatewayChat(api(rig.owner), 'busy');
    const received = capsuleReceives(rig.sim, text);
    const holding = held.sendMessage({ text });
    await received;
    const waiting = gatewayChat(api(rig.other), 'waits');
    const sending = waiting.sendMessage({ text: 'behind it' });
    // The admitting replica folds what it admitted (its idle fold had closed before the append).
    const depthOn = async (gw: TestGateway) => (await gw.core.status(rig.capsule)).queue.depth;
    await until(async () => (await depthOn(rig.other)) === 1, 5_000);
    await until(async () => (await depthOn(rig.owner)) === 1, 5_000);
    await fetch(`${api(rig.owner)}/busy/stop`, { method: 'POST' });
    await Promise.all([holding, sending]);
    expect(waiting.snapshot().messages.at(-1)!.parts.at(-1)).toMatchObject({ text: 'Echo: behind it' });
  });
});
