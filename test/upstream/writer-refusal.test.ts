/**
 * The consumer side: the aligned tail is what the writer accepted. With a tiny queue
 * bound and Redis frozen during a burst, the writer refuses frames; the ingestor drops the connection,
 * waits for room, reconnects, and the replay restores what the capsule still holds. Nothing the
 * capsule still held is missing afterwards, nothing is duplicated.
 */
import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { uniqueCapsule } from '../support/redis.js';
import { atTestEnd, stopAfterTest } from '../support/stop-after-test.js';
import { settle, startRig } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

describe.skipIf(!haveRedis)('a writer that refuses frames', () => {
  it(
    'queue full while Redis is frozen: the replay restores every frame the capsule still holds',
    { timeout: 30_000 },
    async () => {
      const redis = stopAfterTest(await startRedisServer());
      const store = stopAfterTest(new RedisStore(redis.url, { commandTimeoutMs: 300 }));
      const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
      const capsule = uniqueCapsule('refuse');
      // ~100 frames fit; the burst below is 300 frames, well inside the capsule's 512-frame buffer.
      const rig = stopAfterTest(startRig(sim, store, capsule, { writer: { maxPendingBytes: 24_000 } }));
      await rig.connected();
      await sim.submit('warm-up').done;
      await settle(sim, store, capsule, rig);

      redis.pause();
      atTestEnd(() => redis.resume());
      await sim.submit('#sim {"chunks":290,"thinking":5,"burst":true}').done;
      const refused = await rig.until((s) => s.reason === 'log queue full');
      expect(refused.state).toBe('backoff');
      redis.resume();
      await settle(sim, store, capsule, rig);

      const records = await readAll(store, capsule);
      const cmp = compareLog(records, sim.written);
      expect(cmp.problems).toEqual([]);
      // The capsule still held every replayable frame: only id-0 frames (never replayed from 0) may lack.
      expect(cmp.covered.filter((c) => c.frame.id !== '0').map((c) => c.frame)).toEqual([]);
      expect(rig.writer.stats().dropped).toBeGreaterThan(0); // the refusal was real
    },
  );
});
