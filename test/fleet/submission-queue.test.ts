/**
 * The submission queue (docs/submission-queue.md) on two replicas and one real Redis, in front of a
 * simulated capsule in `single` mode (a second task while one runs is `rejected`): messages sent
 * back to back wait their turn and run in admission order, abort settles the queued ones without
 * them ever reaching the capsule, and the bound answers 429 with Retry-After on each surface.
 */
import { once } from 'node:events';
import { createFlueClient } from '@flue/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../support/api-keys.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, TEST_OPS_HEADERS, type TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { capsulesOf, startCrossReplica, until, type CrossReplicaRig } from './cross-replica-rig.js';

const redisUrl = testRedisUrl();
const ALICE = `oag_${'a1'.repeat(32)}`;

/** A reply that takes a while (frames paced by the simulator), so the next messages must wait. */
const slow = (reply: string): string => `#sim ${JSON.stringify({ reply, delayMs: 120, turns: 2 })}`;

interface Settlement {
  submissionId: string;
  outcome: string;
  error?: unknown;
}

const runsOf = (sim: SimulatedCapsule): number[] => [...sim.runs.values()];

/** The messageId of the next task the capsule accepts (its 'run' event), within `ms`. */
const nextRun = async (sim: SimulatedCapsule, ms: number): Promise<string> => {
  const [messageId] = (await once(sim, 'run', { signal: AbortSignal.timeout(ms) })) as [string];
  return messageId;
};

describe.skipIf(!redisUrl)('submission queue (single mode, two replicas)', () => {
  let rig: CrossReplicaRig;
  const flue = (gw: TestGateway, conv: string) =>
    createFlueClient({ url: `${gw.baseUrl}/flue/${rig.capsule}/${conv}`, token: ALICE });
  const api = (gw: TestGateway, path: string) => `${gw.baseUrl}/api/v1/agents/${rig.capsule}${path}`;
  const post = (gw: TestGateway, path: string, body?: unknown) =>
    fetch(api(gw, path), {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const get = (gw: TestGateway, path: string) =>
    fetch(api(gw, path), { headers: { authorization: `Bearer ${ALICE}` } });
  const queueRow = async () =>
    (await capsulesOf(rig.owner)).capsules.find((c) => c.id === rig.capsule) as unknown as {
      queue_depth: number;
      queue_oldest_ms: number;
    };
  /**
   * Nothing of an earlier case still queued (the owner's queue is empty) or running (the capsule is
   * idle), so the next task the capsule takes is this case's.
   */
  const quiet = async () => {
    await until(async () => ((await queueRow()).queue_depth === 0 ? true : undefined), 30_000);
    await rig.sim.idle();
  };

  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!, {
      sim: { taskAcceptance: 'single' },
      config: { apiKeys: [{ sha256: hashApiKey(ALICE), owner: 'alice' }] },
    });
  }, 30_000);
  afterAll(async () => rig?.close());

  it('four Flue messages back to back settle completed in order, beside conversations on the other replica', async () => {
    const mine = flue(rig.owner, 'q-order');
    const others = ['q-other-1', 'q-other-2'].map((c) => flue(rig.other, c));
    const sends = ['one', 'two', 'three', 'four'].map((t) =>
      mine.send({ message: { kind: 'user', body: slow(t) } }),
    );
    const otherSends = others.flatMap((c, i) =>
      ['x', 'y'].map((t) => c.send({ message: { kind: 'user', body: slow(`${t}${i}`) } })),
    );
    const admissions = await Promise.all(sends);
    const otherAdmissions = await Promise.all(otherSends);
    for (const a of admissions) await mine.wait(a);
    await Promise.all(otherAdmissions.map((a, i) => others[Math.floor(i / 2)]!.wait(a)));
    const history = await mine.history();
    expect(history.settlements).toEqual(
      admissions.map((a) => ({ submissionId: a.submissionId, outcome: 'completed' })),
    );
    // Each assistant message answers its own user message, in admission order.
    const replies = history.messages.filter((m) => m.role === 'assistant');
    expect(replies.map((m) => m.submissionId)).toEqual(admissions.map((a) => a.submissionId));
    const texts = replies.map((m) => m.parts.map((p) => ('text' in p ? p.text : '')).join(''));
    expect(texts).toEqual(['one', 'two', 'three', 'four']);
    for (const [i, c] of others.entries()) {
      const h = await c.history();
      expect(h.settlements.map((s) => s.outcome)).toEqual(['completed', 'completed']);
      const t = h.messages
        .filter((m) => m.role === 'assistant')
        .map((m) => m.parts.map((p) => ('text' in p ? p.text : '')).join(''));
      expect(t).toEqual([`x${i}`, `y${i}`]);
    }
    // Nothing ran twice; the queue is empty again on both replicas.
    expect(runsOf(rig.sim).every((n) => n === 1)).toBe(true);
    const rows = await Promise.all([rig.owner, rig.other].map(capsulesOf));
    for (const v of rows) {
      const row = v.capsules.find((c) => c.id === rig.capsule) as unknown as { queue_depth: number };
      expect(row.queue_depth).toBe(0);
    }
  }, 60_000);

  it('three BeeOS conversation messages posted back to back each get a completed reply', async () => {
    const created = (await (await post(rig.other, '/conversations', {})).json()) as {
      data: { conversation_id: string };
    };
    const id = created.data.conversation_id;
    const posted = await Promise.all(
      ['b-one', 'b-two', 'b-three'].map((t) =>
        post(rig.other, `/conversations/${id}/messages`, { message: slow(t) }),
      ),
    );
    expect(posted.map((r) => r.status)).toEqual([202, 202, 202]);
    const ids = await Promise.all(
      posted.map(async (r) => ((await r.json()) as { data: { message_id: string } }).data.message_id),
    );
    interface Row {
      type: string;
      state: string;
      in_reply_to?: string;
      body?: string;
    }
    const replies = await until(async () => {
      const res = await get(rig.owner, `/conversations/${id}/messages?limit=500`);
      const rows = ((await res.json()) as { data: { messages: Row[] } }).data.messages;
      const done = rows.filter((r) => r.type === 'agent_reply' && r.state === 'completed');
      return done.length === 3 ? done : undefined;
    }, 30_000);
    expect(replies.map((r) => r.in_reply_to)).toEqual(ids);
    expect(replies.map((r) => r.body)).toEqual(['b-one', 'b-two', 'b-three']);
  }, 60_000);

  it('a BeeOS task created while the capsule is busy reads queued, then runs', async () => {
    const running = flue(rig.owner, 'q-busy');
    await quiet();
    const started = nextRun(rig.sim, 10_000);
    const first = await running.send({ message: { kind: 'user', body: '#sim {"hold":true}' } });
    // The held task is running: the BeeOS task below is created while the capsule is busy.
    await started;
    const task = (await (await post(rig.owner, '/tasks', { message: 'after the hold' })).json()) as {
      data: { task_id: string; status: string };
    };
    expect(task.data.status).toBe('queued');
    const status = async () =>
      ((await (await get(rig.other, `/tasks/${task.data.task_id}`)).json()) as { data: { status: string } })
        .data.status;
    expect(await status()).toBe('queued');
    // The held task ends (aborted): the queued task runs and completes.
    expect(
      await (
        await fetch(`${rig.owner.baseUrl}/flue/${rig.capsule}/q-busy/abort`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ALICE}` },
        })
      ).json(),
    ).toEqual({ aborted: true });
    await expect(running.wait(first)).rejects.toThrow();
    await until(async () => ((await status()) === 'completed' ? true : undefined), 20_000);
  }, 60_000);

  it('abort with two queued settles all three aborted; the queued two never reach the capsule', async () => {
    const client = flue(rig.other, 'q-abort');
    // The run counts below are this case's alone.
    await quiet();
    const before = rig.sim.runs.size;
    const started = nextRun(rig.sim, 10_000);
    const held = await client.send({ message: { kind: 'user', body: '#sim {"hold":true}' } });
    const queued = [
      await client.send({ message: { kind: 'user', body: 'queued one' } }),
      await client.send({ message: { kind: 'user', body: 'queued two' } }),
    ];
    // The held task is running (the capsule took it) and the other two wait in the queue.
    await started;
    expect(rig.sim.runs.size).toBe(before + 1);
    const row = await until(async () => {
      const r = await queueRow();
      return r.queue_depth === 2 ? r : undefined;
    }, 10_000);
    expect(row.queue_oldest_ms).toBeGreaterThanOrEqual(0);
    const res = await fetch(`${rig.other.baseUrl}/flue/${rig.capsule}/q-abort/abort`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ALICE}` },
    });
    expect(await res.json()).toEqual({ aborted: true });
    for (const a of [held, ...queued]) await expect(client.wait(a)).rejects.toThrow();
    const settlements = (await client.history()).settlements as Settlement[];
    expect(settlements.map((s) => [s.submissionId, s.outcome])).toEqual(
      [held, ...queued].map((a) => [a.submissionId, 'aborted']),
    );
    // A later message runs (the capsule is free again), and the aborted two never started upstream.
    const after = await client.send({ message: { kind: 'user', body: 'after the abort' } });
    await client.wait(after);
    expect(rig.sim.runs.size).toBe(before + 2);
    const metrics = await (await fetch(`${rig.owner.baseUrl}/metrics`, { headers: TEST_OPS_HEADERS })).text();
    expect(metrics).toMatch(new RegExp(`murmur_gateway_queue_depth\\{capsule="${rig.capsule}"\\} 0`));
  }, 60_000);

  it('a capsule restart with two queued: the running one settles failed, the queued two run after it, in order', async () => {
    const client = flue(rig.other, 'q-restart');
    await quiet();
    const started = nextRun(rig.sim, 10_000);
    const held = await client.send({ message: { kind: 'user', body: '#sim {"hold":true}' } });
    const queued = [
      await client.send({ message: { kind: 'user', body: 'queued one' } }),
      await client.send({ message: { kind: 'user', body: 'queued two' } }),
    ];
    await started;
    await until(async () => ((await queueRow()).queue_depth === 2 ? true : undefined), 10_000);
    await rig.sim.restart();
    await expect(client.wait(held)).rejects.toThrow();
    for (const a of queued) await client.wait(a);
    const settlements = (await client.history()).settlements as Settlement[];
    expect(settlements.map((s) => [s.submissionId, s.outcome])).toEqual([
      [held.submissionId, 'failed'],
      ...queued.map((a) => [a.submissionId, 'completed']),
    ]);
    // Nothing ran twice across the restart.
    expect(runsOf(rig.sim).every((n) => n === 1)).toBe(true);
  }, 60_000);
});

describe('submission queue bounds (embedded store)', () => {
  let sim: SimulatedCapsule;
  let gw: TestGateway;

  beforeAll(async () => {
    sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'single' });
    gw = await startTestGateway({
      capsules: { cap: sim.url },
      config: { apiKeys: [{ sha256: hashApiKey(ALICE), owner: 'alice' }] },
      extra: { queue: { maxPerCapsule: 2, maxPerOwner: 2, retryAfterMs: 3000 } },
    });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
  });

  it('past the bound: Flue and BeeOS answer 429 with Retry-After, and nothing is admitted', async () => {
    const url = `${gw.baseUrl}/flue/cap/bounded`;
    const client = createFlueClient({ url, token: ALICE });
    const started = nextRun(sim, 10_000);
    const held = await client.send({ message: { kind: 'user', body: '#sim {"hold":true}' } });
    await started;
    const a = await client.send({ message: { kind: 'user', body: 'waits 1' } });
    const b = await client.send({ message: { kind: 'user', body: 'waits 2' } });
    const refused = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
      body: JSON.stringify({ kind: 'user', body: 'one too many' }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('3');
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe('rate_limited');
    const beeos = await fetch(`${gw.baseUrl}/api/v1/agents/cap/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
      body: JSON.stringify({ message: 'also too many' }),
    });
    expect(beeos.status).toBe(429);
    expect(beeos.headers.get('retry-after')).toBe('3');
    expect(((await beeos.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    const history = await client.history();
    expect(history.messages.filter((m) => m.role === 'user')).toHaveLength(3);
    // Abort frees the queue; the refused messages left nothing behind.
    await client.abort();
    for (const s of [held, a, b]) await expect(client.wait(s)).rejects.toThrow();
    expect(sim.runs.size).toBe(1);
  }, 30_000);
});
