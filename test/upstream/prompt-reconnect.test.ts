/**
 * After a connection the capsule acknowledged ends, the ingestor reconnects at
 * once — the exponential backoff (here a minute) is only for attempts that fail to connect — so cuts
 * while the capsule writes lose nothing but the id-0 frames no replay from 0 can hold.
 */
import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { afterWrites, settle, startRig } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';

describe.skipIf(!testRedisUrl())('reconnecting after an established connection', () => {
  it(
    '8 cuts with a one-minute backoff base: 8 reconnects, no non-id-0 frame lost',
    { timeout: 30_000 },
    async () => {
      const s = stopAfterTest(await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 2 }));
      const store = stopAfterTest(new RedisStore(testRedisUrl()!));
      const capsule = uniqueCapsule('prompt');
      const rig = stopAfterTest(
        startRig(s, store, capsule, { ingestor: { backoffBaseMs: 60_000, backoffCapMs: 60_000 } }),
      );
      await rig.connected();
      let done = false;
      const producer = (async () => {
        while (!done) await s.submit('#sim {"chunks":12,"thinking":2,"tools":1}').done;
      })();
      for (let cut = 0; cut < 8; cut++) {
        await afterWrites(s, 15);
        const before = rig.ingestor.state().reconnects;
        s.cutConnections();
        await rig.reconnectedAfter(before);
      }
      done = true;
      await producer;
      await settle(s, store, capsule, rig);
      expect(rig.ingestor.state().reconnects).toBeGreaterThanOrEqual(8);
      const cmp = compareLog(await readAll(store, capsule), s.written);
      expect(cmp.problems).toEqual([]);
      expect(cmp.covered.filter((c) => c.frame.id !== '0')).toEqual([]);
    },
  );
});
