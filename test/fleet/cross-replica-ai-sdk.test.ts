/**
 * The AI SDK surface across two replicas on one real Redis, with the real `ai` client: a chat sent
 * on one replica streams and reads the same on the other; a turn started on the owner is resumed
 * after a reload on the other replica, and `stop` sent to the replica that does not own the capsule
 * cancels the running task at the capsule and ends the resumed stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
