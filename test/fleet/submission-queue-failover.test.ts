/**
 * The submission queue survives its dispatcher's death: two gateway processes on one redis-server in
 * front of a simulated capsule in `single` mode; with one task running and five queued, the owner
 * (the replica handing them over) is SIGKILLed. The survivor takes the lease, continues from the
 * log, and every message settles, in order, none run twice (the simulator counts each message's runs).
 */
import { createFlueClient } from '@flue/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { replica, until, type Replica } from './fleet-rig.js';

const CAPSULE = 'queued';
const skip = !redisServerAvailable() && process.env.REQUIRE_REDIS !== '1';

interface QueueRow {
  id: string;
  owner: string | null;
  upstream: string;
  queue_depth: number;
}

describe.skipIf(skip)('submission queue: the owner SIGKILLed with five queued', () => {
  let redis: { url: string; stop(): Promise<void> };
  let sim: SimulatedCapsule;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'single' });
    const capsules = [{ id: CAPSULE, url: sim.url }];
    const lease = { ttlMs: 1000, renewMs: 200 };
    replicas = await Promise.all(['q-a', 'q-b'].map((id) => replica(id, redis.url, capsules, lease)));
    await Promise.all(replicas.map((r) => r.proc.start()));
  }, 30_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.proc.kill()));
    await sim?.stop();
    await redis?.stop();
  });

  const rowOf = async (r: Replica): Promise<QueueRow> => (await r.row(CAPSULE)) as unknown as QueueRow;

  it('the survivor finishes them in order; none runs twice', async () => {
    const ownerId = await until('an owner watching', async () => {
      const row = await rowOf(replicas[0]!);
      return row.owner && sim.watchers === 1 ? row.owner : null;
    });
    const owner = replicas.find((r) => r.id === ownerId)!;
    const survivor = replicas.find((r) => r !== owner)!;
    const client = createFlueClient({ url: `${survivor.url}/flue/${CAPSULE}/conv-failover` });
    const body = (reply: string, delayMs: number) => `#sim ${JSON.stringify({ reply, delayMs, turns: 2 })}`;
    const first = await client.send({ message: { kind: 'user', body: body('first', 300) } });
    const queued = [];
    for (const t of ['q1', 'q2', 'q3', 'q4', 'q5'])
      queued.push(await client.send({ message: { kind: 'user', body: body(t, 20) } }));
    // The first runs on the capsule and the owner holds five in its queue: then it dies.
    await until('the first running, five queued', async () =>
      sim.runs.size === 1 && (await rowOf(owner)).queue_depth === 5 ? true : null,
    );
    await owner.proc.kill();
    await until(
      'the survivor owns the capsule',
      async () => {
        const row = await rowOf(survivor);
        return row.owner === survivor.id && row.upstream === 'connected' ? true : null;
      },
      20_000,
    );
    for (const a of queued) await client.wait(a);
    const history = await client.history();
    const outcomes = new Map(history.settlements.map((s) => [s.submissionId, s.outcome]));
    // The first ran through the failover on the capsule: it settles too (its frames are in the log).
    expect(outcomes.get(first.submissionId)).toBe('completed');
    expect(queued.map((a) => outcomes.get(a.submissionId))).toEqual(Array(5).fill('completed'));
    const replies = history.messages.filter((m) => m.role === 'assistant');
    const texts = replies.map((m) => m.parts.map((p) => ('text' in p ? p.text : '')).join(''));
    expect(texts).toEqual(['first', 'q1', 'q2', 'q3', 'q4', 'q5']);
    expect(sim.runs.size).toBe(6);
    expect([...sim.runs.values()]).toEqual(Array(6).fill(1));
    expect((await rowOf(survivor)).queue_depth).toBe(0);
  }, 90_000);
});
