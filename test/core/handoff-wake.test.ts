/**
 * An admitted message wakes the capsule owner's dispatcher at once (docs/submission-queue.md "The
 * wake-up"): on the same replica in-process, across replicas through Redis. The idle poll is set to
 * ten minutes here, so a capsule that receives each of several messages (each sent once the capsule
 * is idle again, as a user's next message) can only have been handed them by the wake-up. Across
 * replicas nothing else tells the owner (without the publish the first message waits the ten
 * minutes); on one replica the admission's own read of the queue may also have it folded.
 */
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../support/api-keys.js';
import type { DispatchTuning } from '../../src/core/dispatcher.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { startCrossReplica, type CrossReplicaRig } from '../fleet/cross-replica-rig.js';

const redisUrl = testRedisUrl();
const ALICE = `oag_${'b2'.repeat(32)}`;
const KEYS = { apiKeys: [{ sha256: hashApiKey(ALICE), owner: 'alice' }] };
/** Longer than any case runs: only a wake-up can explain a hand-off. */
const NO_POLL: DispatchTuning = { idlePollMs: 600_000, orphanGraceMs: 1 };
/** A bound on the wait for the capsule, far below the idle poll (not a latency assertion). */
const BOUND_MS = 15_000;

const post = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

/** The messageId of the next task the capsule starts (the simulator's `run` event). */
const nextRun = async (sim: SimulatedCapsule): Promise<string> => {
  const [messageId] = (await once(sim, 'run', { signal: AbortSignal.timeout(BOUND_MS) })) as [string];
  return messageId;
};

/**
 * One message per surface, each once the previous one has run and the capsule is idle (the
 * dispatcher idle too, its queue closed): each reaches the capsule.
 */
const sendEach = async (sim: SimulatedCapsule, base: string, capsule: string): Promise<void> => {
  const api = `/api/v1/agents/${capsule}`;
  const conversation = (await (await post(base, `${api}/conversations`, {})).json()) as {
    data: { conversation_id: string };
  };
  const sends: [string, () => Promise<Response>][] = [
    ['BeeOS task', () => post(base, `${api}/tasks`, { message: 'wake one' })],
    [
      'BeeOS conversation message',
      () =>
        post(base, `${api}/conversations/${conversation.data.conversation_id}/messages`, {
          message: 'wake two',
        }),
    ],
    ['Flue message', () => post(base, `/flue/${capsule}/wake-conv`, { kind: 'user', body: 'wake three' })],
    ['BeeOS task again', () => post(base, `${api}/tasks`, { message: 'wake four' })],
  ];
  for (const [name, send] of sends) {
    await sim.idle();
    const ran = nextRun(sim);
    const res = await send();
    expect(res.status, name).toBe(202);
    await expect(ran, name).resolves.toEqual(expect.any(String));
  }
  await sim.idle();
};

describe('hand-off wake-up: one gateway, embedded store', () => {
  let sim: SimulatedCapsule;
  let gw: TestGateway;
  beforeAll(async () => {
    sim = await startSimulator({ heartbeatMs: 200 });
    gw = await startTestGateway({ capsules: { cap: sim.url }, config: KEYS, tuning: { queue: NO_POLL } });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
  });

  it('each message reaches the idle capsule though the idle poll is ten minutes', async () => {
    await sendEach(sim, gw.baseUrl, 'cap');
    expect([...sim.runs.values()]).toEqual([1, 1, 1, 1]);
  }, 60_000);
});

describe.skipIf(!redisUrl)('hand-off wake-up: two replicas on one Redis', () => {
  let rig: CrossReplicaRig;
  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!, { config: KEYS, queue: NO_POLL });
  }, 30_000);
  afterAll(async () => rig?.close());

  it('admitted on the replica that does not own the capsule: the owner hands it over', async () => {
    await sendEach(rig.sim, rig.other.baseUrl, rig.capsule);
    expect([...rig.sim.runs.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);

  it('admitted on the owner: handed over in-process', async () => {
    await sendEach(rig.sim, rig.owner.baseUrl, rig.capsule);
    expect([...rig.sim.runs.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);
});

describe.skipIf(!redisUrl)('hand-off wake-up lost: the idle poll still hands it over', () => {
  let rig: CrossReplicaRig;
  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!, { config: KEYS, queue: { idlePollMs: 200, orphanGraceMs: 1 } });
  }, 30_000);
  afterAll(async () => rig?.close());

  it('a submission queued in the log with no signal at all reaches the capsule', async () => {
    await rig.sim.idle();
    const ran = nextRun(rig.sim);
    // Written straight to the log by the replica that does not own the capsule, as an admission
    // whose publish was lost: only the owner's look at the head of the log can find it.
    await rig.other.gateway.writer.append(rig.capsule, {
      kind: 'submission',
      protocol: 'murmur',
      owner: null,
      contextId: 'lost-signal',
      messageId: 'lost-signal-1',
      text: 'no wake-up',
      queued: true,
      receivedAt: Date.now(),
    });
    await expect(ran).resolves.toBe('lost-signal-1');
  }, 30_000);
});
