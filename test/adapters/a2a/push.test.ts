/**
 * A2A push notifications against a real HTTP receiver on 127.0.0.1 (the gateway's config admits
 * loopback receivers here), in front of the capsule simulator: every status and artifact update of
 * the task is delivered, in order, equal to what the stream carries, with the config's token and
 * authorization; a receiver answering 500 is retried until it takes the event, nothing lost; the
 * config methods through `@a2a-js/sdk` 1.3.0 unchanged, and through the 0.3 wire.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { uniqueCapsule } from '../../support/redis.js';
import { userMessage } from './sdk-model.js';
import { sseEvents } from './sse.js';
import { acceptedOnce, isTerminalUpdate, startPushReceiver, type PushReceiver } from './push-receiver.js';

let sims: SimulatedCapsule[] = [];
let gateways: TestGateway[] = [];
let receivers: PushReceiver[] = [];

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await Promise.all(sims.map((s) => s.stop()));
  await Promise.all(receivers.map((r) => r.close()));
  gateways = [];
  sims = [];
  receivers = [];
});

const LOOPBACK = {
  a2a: { pushNotifications: { webhooks: { allowLoopback: true, allowHosts: [], timeoutMs: 5000 } } },
};

const setup = async (statuses: number[] = [], extra: object = LOOPBACK) => {
  const sim = await startSimulator({ taskAcceptance: 'single' });
  sims.push(sim);
  const receiver = await startPushReceiver(statuses);
  receivers.push(receiver);
  const capsule = uniqueCapsule('a2a-push');
  const gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    extra,
    tuning: { queue: { orphanGraceMs: 100 }, a2aPush: { sweepMs: 100, retryFirstMs: 20 } },
  });
  gateways.push(gw);
  const base = `${gw.baseUrl}/a2a/${capsule}/`;
  return { sim, gw, capsule, base, receiver };
};

const rpc = (base: string, method: string, params: unknown, version = '1.0', id = 1) =>
  fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': version },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
  });

const message = (text: string) => ({ messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ text }] });

/** The stream's updates (its Task snapshot left out) as deliveries carry them: event id and body. */
const updatesOf = async (res: Response) =>
  (await sseEvents(res))
    .map((e) => ({ eventId: e.id ?? '', body: (e.data as { result: Record<string, unknown> }).result }))
    .filter((e) => !('task' in e.body));

describe('A2A push notifications', () => {
  it('every update of a streamed task reaches the webhook, in order, with its token and authorization', async () => {
    const { base, receiver } = await setup();
    const res = await rpc(base, 'SendStreamingMessage', {
      message: message('#sim {"chunks":6,"tools":1,"thinking":1}'),
      configuration: {
        taskPushNotificationConfig: {
          url: receiver.url,
          token: 'tok-1',
          authentication: { scheme: 'Bearer', credentials: 'cred-1' },
        },
      },
    });
    const streamed = await updatesOf(res);
    expect(isTerminalUpdate({ body: streamed.at(-1)!.body } as never)).toBe(true);
    await receiver.until((d) => d.some(isTerminalUpdate));
    expect(receiver.deliveries.map(({ eventId, body }) => ({ eventId, body }))).toEqual(streamed);
    for (const d of receiver.deliveries) {
      expect(d.headers['content-type']).toBe('application/a2a+json');
      expect(d.headers['x-a2a-notification-token']).toBe('tok-1');
      expect(d.headers.authorization).toBe('Bearer cred-1');
    }
  });

  it('without an a2a webhooks key the policy is the top-level webhooks', async () => {
    const { base, receiver } = await setup([], {
      webhooks: { allowLoopback: true, allowHosts: [], timeoutMs: 5000 },
    });
    const res = await rpc(base, 'SendStreamingMessage', {
      message: message('#sim {"chunks":2}'),
      configuration: { taskPushNotificationConfig: { url: receiver.url } },
    });
    const streamed = await updatesOf(res);
    await receiver.until((d) => d.some(isTerminalUpdate));
    expect(receiver.deliveries.map(({ eventId, body }) => ({ eventId, body }))).toEqual(streamed);
  });

  it('a receiver answering 500 is retried until it takes each event: nothing lost, order kept', async () => {
    const { base, receiver } = await setup([500, 500, 500]);
    const res = await rpc(base, 'SendStreamingMessage', {
      message: message('#sim {"chunks":4}'),
      configuration: { taskPushNotificationConfig: { url: receiver.url } },
    });
    const streamed = await updatesOf(res);
    await receiver.until((d) => d.some((x) => x.status === 200 && isTerminalUpdate(x)));
    // The first event three times (refused), then every event once, in the stream's order.
    expect(receiver.deliveries.slice(0, 4).map((d) => [d.eventId, d.status])).toEqual([
      [streamed[0]!.eventId, 500],
      [streamed[0]!.eventId, 500],
      [streamed[0]!.eventId, 500],
      [streamed[0]!.eventId, 200],
    ]);
    expect(acceptedOnce(receiver.deliveries).map(({ eventId, body }) => ({ eventId, body }))).toEqual(
      streamed,
    );
    expect(receiver.deliveries).toHaveLength(streamed.length + 3);
  });

  it('the config methods through @a2a-js/sdk 1.3.0: create, get, list, delete; the updates after create arrive', async () => {
    const { base, receiver } = await setup();
    const client: Client = await new ClientFactory().createFromUrl(base);
    const card = await client.getAgentCard();
    expect(card.capabilities?.pushNotifications).toBe(true);
    const sent = await client.sendMessage({
      ...userMessage('#sim {"chunks":12,"delayMs":80}'),
      configuration: { returnImmediately: true },
    } as never);
    const taskId = 'id' in sent ? sent.id : '';
    const created = await client.createTaskPushNotificationConfig({
      taskId,
      id: 'cfg-1',
      url: receiver.url,
      token: 'tok-sdk',
    } as never);
    expect([created.taskId, created.id, created.url, created.token]).toEqual([
      taskId,
      'cfg-1',
      receiver.url,
      'tok-sdk',
    ]);
    const other = await client.createTaskPushNotificationConfig({
      taskId,
      id: 'cfg-2',
      url: `${receiver.url}?second`,
      authentication: { scheme: 'Basic', credentials: 'dXNlcjpwdw==' },
    } as never);
    expect(other.authentication).toEqual({ scheme: 'Basic', credentials: 'dXNlcjpwdw==' });
    const got = await client.getTaskPushNotificationConfig({ taskId, id: 'cfg-1' } as never);
    expect([got.id, got.url, got.token]).toEqual(['cfg-1', receiver.url, 'tok-sdk']);
    const listed = await client.listTaskPushNotificationConfig({ taskId } as never);
    expect(listed.configs.map((c) => c.id)).toEqual(['cfg-1', 'cfg-2']);
    await client.deleteTaskPushNotificationConfig({ taskId, id: 'cfg-2' } as never);
    expect(
      (await client.listTaskPushNotificationConfig({ taskId } as never)).configs.map((c) => c.id),
    ).toEqual(['cfg-1']);
    await receiver.until((d) => d.some(isTerminalUpdate));
    // Every update after the config was set, in order: a contiguous tail of the task's events.
    const replay = await fetch(base, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'last-event-id': '0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: taskId } }),
    });
    const all = await updatesOf(replay);
    const got1 = receiver.deliveries.filter((d) => d.headers['x-a2a-notification-token'] === 'tok-sdk');
    expect(got1.length).toBeGreaterThan(0);
    expect(got1.map(({ eventId, body }) => ({ eventId, body }))).toEqual(all.slice(all.length - got1.length));
    // The task ended and its last update was taken: its configs are gone with it.
    await expect(client.getTaskPushNotificationConfig({ taskId, id: 'cfg-1' } as never)).rejects.toThrow(
      /not found/i,
    );
  });

  it('the 0.3 wire: set, get, list and delete by their 0.3 names; deliveries are 0.3 events', async () => {
    const { base, receiver } = await setup();
    const sent = (await (
      await rpc(
        base,
        'message/send',
        {
          message: {
            kind: 'message',
            messageId: 'm-03',
            role: 'user',
            parts: [{ kind: 'text', text: '#sim {"hold":true}' }],
          },
          configuration: { blocking: false },
        },
        '0.3',
      )
    ).json()) as { result: { id: string } };
    const taskId = sent.result.id;
    const set = await rpc(
      base,
      'tasks/pushNotificationConfig/set',
      {
        taskId,
        pushNotificationConfig: {
          id: 'c03',
          url: receiver.url,
          token: 't03',
          authentication: { schemes: ['Basic'], credentials: 'eDp5' },
        },
      },
      '0.3',
    );
    const config03 = {
      taskId,
      pushNotificationConfig: {
        id: 'c03',
        url: receiver.url,
        token: 't03',
        authentication: { schemes: ['Basic'], credentials: 'eDp5' },
      },
    };
    expect(await set.json()).toEqual({ jsonrpc: '2.0', id: 1, result: config03 });
    const get = await rpc(base, 'tasks/pushNotificationConfig/get', { id: taskId }, '0.3');
    expect(await get.json()).toEqual({ jsonrpc: '2.0', id: 1, result: config03 });
    const set2 = await rpc(
      base,
      'tasks/pushNotificationConfig/set',
      { taskId, pushNotificationConfig: { id: 'gone', url: receiver.url } },
      '0.3',
    );
    expect(set2.status).toBe(200);
    const del = await rpc(
      base,
      'tasks/pushNotificationConfig/delete',
      { id: taskId, pushNotificationConfigId: 'gone' },
      '0.3',
    );
    expect(await del.json()).toEqual({ jsonrpc: '2.0', id: 1, result: null });
    const list = await rpc(base, 'tasks/pushNotificationConfig/list', { id: taskId }, '0.3');
    expect(await list.json()).toEqual({ jsonrpc: '2.0', id: 1, result: [config03] });
    await rpc(base, 'tasks/cancel', { id: taskId }, '0.3');
    await receiver.until((d) => d.some((x) => x.body.final === true));
    const last = receiver.deliveries.at(-1)!;
    expect(last.headers['content-type']).toBe('application/json');
    expect(last.headers.authorization).toBe('Basic eDp5');
    expect(last.headers['x-a2a-notification-token']).toBe('t03');
    expect(last.body).toMatchObject({
      kind: 'status-update',
      taskId,
      final: true,
      status: { state: 'canceled' },
    });
    expect(
      receiver.deliveries.every((d) => d.body.kind === 'status-update' || d.body.kind === 'artifact-update'),
    ).toBe(true);
  });
});
