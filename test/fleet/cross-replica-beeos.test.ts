/**
 * BeeOS across two replicas on one real Redis: a channel made on one replica is served, guarded,
 * cancelled and retried on the other at once (the channel registry follows the log), and two
 * requests with one Idempotency-Key on both replicas at the same instant make one task.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../support/api-keys.js';
import type { TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { startCrossReplica, until, type CrossReplicaRig } from './cross-replica-rig.js';

const redisUrl = testRedisUrl();
const ALICE = `oag_${'a1'.repeat(32)}`;
const BOB = `oag_${'b2'.repeat(32)}`;

interface Envelope {
  type: string;
  offset: number;
  state: string;
  body?: string;
}

describe.skipIf(!redisUrl)('BeeOS on every replica', () => {
  let rig: CrossReplicaRig;
  const api = (gw: TestGateway, path: string) => `${gw.baseUrl}/api/v1/agents/${rig.capsule}${path}`;
  const get = (gw: TestGateway, path: string, key = ALICE) =>
    fetch(api(gw, path), { headers: { authorization: `Bearer ${key}` } });
  const post = (gw: TestGateway, path: string, body: unknown, key = ALICE) =>
    fetch(api(gw, path), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const json = async <T>(res: Response | Promise<Response>): Promise<T> =>
    ((await (await res).json()) as { data: T }).data;
  const taskStatus = async (gw: TestGateway, id: string) =>
    (await json<{ status: string }>(get(gw, `/tasks/${id}`))).status;

  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!, {
      config: {
        apiKeys: [
          { sha256: hashApiKey(ALICE), owner: 'alice' },
          { sha256: hashApiKey(BOB), owner: 'bob' },
        ],
      },
    });
  }, 30_000);
  afterAll(async () => rig?.close());

  it('a task made on one replica: followed, guarded and retried on the other', async () => {
    const [a, b] = [rig.owner, rig.other];
    // b has read the registry before the task exists (it must not keep that view).
    expect((await get(b, '/tasks/task_unknown')).status).toBe(404);
    const created = await json<{ task_id: string }>(
      post(a, '/tasks', { message: 'made on a', idempotency_key: 'k-follow' }),
    );
    // Guarded on b as on a: another owner is refused, the owner served.
    expect((await get(b, `/tasks/${created.task_id}`, BOB)).status).toBe(404);
    expect((await get(b, `/tasks/${created.task_id}`)).status).toBe(200);
    // The same key on b is the same task; another body with it is a conflict.
    const retried = await post(b, '/tasks', { message: 'made on a', idempotency_key: 'k-follow' });
    expect(retried.status).toBe(202);
    expect((await json<{ task_id: string }>(retried)).task_id).toBe(created.task_id);
    expect((await post(b, '/tasks', { message: 'other', idempotency_key: 'k-follow' })).status).toBe(409);
    // Its stream on b ends task_terminal with the reply.
    const events = await (await get(b, `/tasks/${created.task_id}/events`)).text();
    expect(events).toContain('task_terminal');
    expect(events).toContain('Echo: made on a');
    expect(await taskStatus(b, created.task_id)).toBe('completed');
  });

  it('a reader hopping replicas with `since` resumes exactly', async () => {
    const [a, b] = [rig.owner, rig.other];
    const created = await json<{ task_id: string }>(
      post(b, '/tasks', { message: '#sim {"chunks":6,"thinking":2}' }),
    );
    await until(
      async () => ((await taskStatus(a, created.task_id)) === 'completed' ? true : undefined),
      10_000,
    );
    const path = `/tasks/${created.task_id}/messages?include_deltas=true`;
    const all = (await json<{ messages: Envelope[] }>(get(a, path))).messages;
    expect(all.length).toBeGreaterThan(4);
    // Page by page, alternating replicas, each page resuming at the last offset seen.
    const hopped: Envelope[] = [];
    let since = 0;
    for (let i = 0; ; i++) {
      const gw = i % 2 === 0 ? b : a;
      const page = await json<{ messages: Envelope[]; has_more: boolean }>(
        get(gw, `${path}&limit=2&since=${since}`),
      );
      hopped.push(...page.messages);
      if (!page.has_more) break;
      since = page.messages.at(-1)!.offset;
    }
    expect(hopped).toEqual(all);
  });

  it('a conversation opened on one replica takes messages on the other; cancel crosses too', async () => {
    const [a, b] = [rig.owner, rig.other];
    const conv = await json<{ conversation_id: string }>(post(a, '/conversations', {}));
    expect((await get(b, `/conversations/${conv.conversation_id}`, BOB)).status).toBe(404);
    expect((await post(b, `/conversations/${conv.conversation_id}/messages`, { message: 'hi' })).status).toBe(
      202,
    );
    await until(async () => {
      const m = await json<{ messages: Envelope[] }>(
        get(a, `/conversations/${conv.conversation_id}/messages`),
      );
      return m.messages.some((e) => e.state === 'completed' && e.body === 'Echo: hi') ? true : undefined;
    }, 10_000);

    // A held task made on a, cancelled through b: the capsule cancels it.
    const before = rig.sim.runs.size;
    const held = await json<{ task_id: string }>(post(a, '/tasks', { message: '#sim {"hold":true}' }));
    // Running on the capsule (a task canceled while still queued never reaches it).
    await until(async () => (rig.sim.runs.size > before ? true : undefined), 10_000);
    const cancel = await post(b, `/tasks/${held.task_id}/cancel`, {});
    expect(cancel.status).toBe(200);
    await until(
      async () => (rig.sim.written.some((f) => f.data.includes('"canceled"')) ? true : undefined),
      10_000,
    );
    expect(await taskStatus(a, held.task_id)).toBe('canceled');
  });

  it('the same Idempotency-Key on both replicas at the same instant makes one task', async () => {
    const [a, b] = [rig.owner, rig.other];
    const before = rig.sim.written.length;
    const body = { message: 'once only', idempotency_key: 'k-race' };
    const answers = await Promise.all([post(a, '/tasks', body), post(b, '/tasks', body)]);
    expect(answers.map((r) => r.status)).toEqual([202, 202]);
    const ids = await Promise.all(answers.map((r) => json<{ task_id: string }>(r)));
    expect(ids[0]!.task_id).toBe(ids[1]!.task_id);
    await until(
      async () => ((await taskStatus(b, ids[0]!.task_id)) === 'completed' ? true : undefined),
      10_000,
    );
    // One task reached the capsule.
    const starts = rig.sim.written
      .slice(before)
      .filter((f) => f.id === '0' && f.data.includes('inference turn 1'));
    expect(starts).toHaveLength(1);
  });
});
