/**
 * A2A push notifications across a failover: two gateway processes on one redis-server in front of
 * a simulated capsule; a task whose updates go to a webhook receiver on 127.0.0.1 is running when
 * the capsule's owner (its deliverer) is SIGKILLed. The survivor takes the capsule over and goes on
 * from the cursor stored in Redis: the receiver gets every update of the task at least once and,
 * after dedupe by event id, exactly the task's updates in order (nothing lost).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { sseEvents } from '../adapters/a2a/sse.js';
import {
  acceptedOnce,
  isTerminalUpdate,
  startPushReceiver,
  type PushReceiver,
} from '../adapters/a2a/push-receiver.js';
import { replica, until, type Replica } from './fleet-rig.js';

const CAPSULE = 'pushed';
const skip = !redisServerAvailable() && process.env.REQUIRE_REDIS !== '1';

describe.skipIf(skip)('A2A push notifications: the owner SIGKILLed during a push-notified task', () => {
  let redis: { url: string; stop(): Promise<void> };
  let sim: SimulatedCapsule;
  let receiver: PushReceiver;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator({ heartbeatMs: 200 });
    receiver = await startPushReceiver();
    const capsules = [{ id: CAPSULE, url: sim.url }];
    const lease = { ttlMs: 1000, renewMs: 200 };
    const extra = {
      a2a: { pushNotifications: { webhooks: { allowLoopback: true, allowHosts: [], timeoutMs: 5000 } } },
    };
    replicas = await Promise.all(['p-a', 'p-b'].map((id) => replica(id, redis.url, capsules, lease, extra)));
    await Promise.all(replicas.map((r) => r.proc.start()));
  }, 30_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.proc.kill()));
    await receiver?.close();
    await sim?.stop();
    await redis?.stop();
  });

  const rpc = (r: Replica, method: string, params: unknown, headers: Record<string, string> = {}) =>
    fetch(`${r.url}/a2a/${CAPSULE}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });

  it('the survivor delivers the rest from the stored cursor: every update, in order', async () => {
    const ownerId = await until('an owner watching', async () => {
      const row = await replicas[0]!.row(CAPSULE);
      return row.owner && sim.watchers === 1 ? row.owner : null;
    });
    const owner = replicas.find((r) => r.id === ownerId)!;
    const survivor = replicas.find((r) => r !== owner)!;
    const sent = await rpc(survivor, 'SendMessage', {
      message: {
        messageId: 'm-failover',
        role: 'ROLE_USER',
        parts: [{ text: '#sim {"chunks":40,"delayMs":60,"tools":1}' }],
      },
      configuration: {
        returnImmediately: true,
        taskPushNotificationConfig: { url: receiver.url, token: 'failover-token' },
      },
    });
    const taskId = ((await sent.json()) as { result: { task: { id: string } } }).result.task.id;
    // The owner has delivered some of the task's updates: then it dies, mid-task.
    await receiver.until((d) => d.length >= 5);
    await owner.proc.kill();
    const beforeKill = receiver.deliveries.length;
    expect(receiver.deliveries.some(isTerminalUpdate)).toBe(false);
    await until(
      'the survivor owns the capsule',
      async () => {
        const row = await survivor.row(CAPSULE);
        return row.owner === survivor.id && row.upstream === 'connected' ? true : null;
      },
      20_000,
    );
    await receiver.until((d) => d.some(isTerminalUpdate), 40_000);
    // The task's updates as the log holds them (a replay from the start, on the survivor).
    const replay = await rpc(survivor, 'SubscribeToTask', { id: taskId }, { 'last-event-id': '0' });
    const updates = (await sseEvents(replay))
      .map((e) => ({ eventId: e.id ?? '', body: (e.data as { result: Record<string, unknown> }).result }))
      .filter((e) => !('task' in e.body));
    expect(updates.length).toBeGreaterThan(40);
    const received = acceptedOnce(receiver.deliveries);
    expect(received.map(({ eventId, body }) => ({ eventId, body }))).toEqual(updates);
    // The survivor delivered the rest (the task was not over when the owner died).
    expect(receiver.deliveries.length).toBeGreaterThan(beforeKill);
    const ids = received.map((d) => Number(d.eventId));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(receiver.deliveries.every((d) => d.headers['x-a2a-notification-token'] === 'failover-token')).toBe(
      true,
    );
  }, 90_000);
});
