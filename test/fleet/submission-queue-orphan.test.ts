/**
 * A hand-off whose outcome is unknown: the log (real Redis) holds a queued BeeOS task turn and its
 * `submission-handed` fact, but no frame of a task for it: the replica that recorded the hand-off
 * died before it knew whether the capsule took it. The next owner settles it `failed` with a reason
 * that says so, never sends it, and runs what was queued behind it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORPHAN_REASON } from '../../src/core/dispatcher.js';
import type { LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { until } from './cross-replica-rig.js';

const redisUrl = testRedisUrl();

describe.skipIf(!redisUrl)('submission queue: a hand-off with an unknown outcome', () => {
  let sim: SimulatedCapsule;
  let gw: TestGateway;
  let store: RedisStore;
  const capsule = uniqueCapsule('orphan');

  beforeAll(async () => {
    sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'single' });
    store = new RedisStore(redisUrl!);
    const queued = (messageId: string, text: string) =>
      ({
        kind: 'submission',
        protocol: 'beeos',
        owner: 'alice',
        contextId: 'ctx-orphan',
        messageId,
        text,
        queued: true,
        receivedAt: Date.now(),
      }) as const;
    // What a dead owner left: two queued, the first handed over, no task frame after it.
    await store.append(capsule, [
      queued('m-lost', 'was it sent?'),
      queued('m-next', 'next in line'),
      {
        kind: 'fact',
        fact: 'submission-handed',
        messageId: 'm-lost',
        contextId: 'ctx-orphan',
        receivedAt: Date.now(),
      },
    ]);
    gw = await startTestGateway({
      capsules: { [capsule]: sim.url },
      redisUrl,
      tuning: { queue: { orphanGraceMs: 300 } },
    });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
    await store?.close();
  });

  it('is settled failed with a reason that says so, never sent; the next one runs', async () => {
    const log = async (): Promise<LogRecord[]> => (await gw.core.read(capsule, 0, 1000)).records;
    const withdrawn = await until(async () => {
      const r = (await log()).find((x) => x.kind === 'fact' && x.fact === 'submission-withdrawn');
      return r;
    }, 15_000);
    expect(withdrawn).toMatchObject({ messageId: 'm-lost', outcome: 'failed', reason: ORPHAN_REASON });
    await until(async () => (sim.runs.get('m-next') === 1 ? true : undefined), 15_000);
    await until(
      async () =>
        (await log()).some((x) => x.kind === 'frame' && x.data.includes('"completed"')) ? true : undefined,
      15_000,
    );
    expect(sim.runs.has('m-lost')).toBe(false);
    expect([...sim.runs.entries()]).toEqual([['m-next', 1]]);
    const handed = (await log()).filter((x) => x.kind === 'fact' && x.fact === 'submission-handed');
    expect(handed.map((h) => (h as { messageId: string }).messageId)).toEqual(['m-lost', 'm-next']);
  }, 40_000);
});
