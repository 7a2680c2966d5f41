/**
 * The gateway may start before Redis. Reading the stored tail is retried with
 * backoff (visible as the state reason 'store unavailable'), and once Redis comes up the capsule is
 * ingested: the log equals what the capsule wrote.
 */
import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import {
  freePort,
  redisServerAvailable,
  startRedisServer,
  type RedisServer,
} from '../support/redis-server.js';
import { uniqueCapsule } from '../support/redis.js';
import { atTestEnd, stopAfterTest } from '../support/stop-after-test.js';
import { settle, startRig } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

describe.skipIf(!haveRedis)('start-up before Redis', () => {
  it('Redis comes up after the ingestor started: the capsule is ingested', { timeout: 30_000 }, async () => {
    const port = await freePort();
    // Redis starts last but must stop last: the rig and the store stop while it still answers.
    const late: { redis?: RedisServer } = {};
    atTestEnd(() => late.redis?.stop());
    const store = stopAfterTest(new RedisStore(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 300 }));
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
    const capsule = uniqueCapsule('late');
    const rig = stopAfterTest(
      startRig(sim, store, capsule, { ingestor: { backoffBaseMs: 50, backoffCapMs: 400 } }),
    );
    await sim.submit('#sim {"chunks":6}').done; // written while nothing can be stored
    // The ingestor has tried the store and is waiting for it (not connected, not given up).
    const waiting = await rig.until((s) => s.state !== 'connecting');
    expect(waiting).toMatchObject({ state: 'backoff', reason: 'store unavailable' });

    late.redis = await startRedisServer(port);
    await rig.connected();
    await sim.submit('#sim {"chunks":6,"tools":1}').done;
    await settle(sim, store, capsule, rig);

    const records = await readAll(store, capsule);
    const cmp = compareLog(records, sim.written);
    expect(cmp.problems).toEqual([]);
    // Only the first task's id-0 frame predates the first connection (covered by cold-attach).
    expect(cmp.covered.map((c) => c.frame.id)).toEqual(['0']);
  });
});
