/**
 * Ingestion while Redis is unreachable: a simulated capsule bursts while the store's Redis
 * is frozen for several seconds; the upstream read never stalls (the capsule drops frames from a
 * reader that lags, so a stall would show as loss), frames wait in the writer's queue, and once Redis
 * answers again the log equals what the capsule wrote — nothing lost, nothing duplicated.
 */
import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { uniqueCapsule } from '../support/redis.js';
import { atTestEnd, stopAfterTest } from '../support/stop-after-test.js';
import { afterWrites, settle, startRig } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

describe.skipIf(!haveRedis)('ingestion across a Redis outage', () => {
  it('Redis frozen for seconds mid-burst: every frame the capsule wrote is logged once, in order', async () => {
    const redis = stopAfterTest(await startRedisServer());
    // A short command timeout so the writer notices the frozen Redis quickly and queues.
    const store = stopAfterTest(new RedisStore(redis.url, { commandTimeoutMs: 300 }));
    const sim = stopAfterTest(await startSimulator());
    const capsule = uniqueCapsule('outage');
    const rig = stopAfterTest(startRig(sim, store, capsule));
    await rig.connected();
    await sim.submit('warm-up').done;

    // The burst: 3,000 frames written back to back; freeze Redis after the first few hundred.
    const burst = sim.submit('#sim {"chunks":3000,"thinking":20,"tools":5,"burst":true}');
    await afterWrites(sim, 300);
    redis.pause();
    atTestEnd(() => redis.resume());
    await burst.done;
    // Frozen while the capsule finishes the burst and keeps writing another task.
    await sim.submit('#sim {"chunks":1500,"delayMs":2}').done;
    const queuedWhileDown = rig.writer.stats().queued;
    redis.resume();

    await settle(sim, store, capsule, rig);
    const records = await readAll(store, capsule);
    const result = compareLog(records, sim.written);
    expect(result.problems).toEqual([]);
    // Nothing needed a "possibly missing" excuse: the outage lost nothing.
    expect(result.covered).toEqual([]);
    expect(result.matched).toBe(sim.written.length);
    expect(
      records.some(
        (r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing' && r.reason === 'store-unavailable',
      ),
    ).toBe(false);
    // The outage was real: frames did wait in memory while Redis was frozen.
    expect(queuedWhileDown).toBeGreaterThan(0);
    expect(rig.writer.stats().failures).toBeGreaterThan(0);
  });
});
