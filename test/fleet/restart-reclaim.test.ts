/**
 * A replica restarted with the same replica id (a fixed `replicaId`, or a container's host name and
 * pid) takes its capsules back at once instead of waiting out its previous incarnation's lease: with
 * a 60 s lease the capsule is watched again long before that lease could have expired (the test's
 * own timeout is shorter). A single-replica deployment that restarts loses no more than a reconnect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { replica, until, type Replica } from './fleet-rig.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

describe.skipIf(!haveRedis)('a replica restarted under the same id', () => {
  let redis: RedisServer;
  let sim: SimulatedCapsule;
  let gw: Replica;

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator();
  });
  afterAll(async () => {
    await gw?.proc.kill();
    await sim?.stop();
    await redis?.stop();
  });

  it(
    'takes its capsule back at once after SIGKILL (not after its 60 s lease)',
    { timeout: 25_000 },
    async () => {
      gw = await replica('solo', redis.url, [{ id: 'alpha', url: sim.url }], {
        ttlMs: 60_000,
        renewMs: 1_000,
      });
      await gw.proc.start();
      const first = await until('the first term', async () => {
        const row = await gw.row('alpha');
        return row.owner === 'solo' && row.upstream === 'connected' ? row : null;
      });

      await gw.proc.kill(); // its lease stays in Redis for up to 60 s
      await gw.proc.start();
      const second = await until('the capsule watched again', async () => {
        const row = await gw.row('alpha');
        return row.upstream === 'connected' && row.fencing_token > first.fencing_token ? row : null;
      });
      expect(second.owner).toBe('solo');
      // A new term: its token fences anything the previous incarnation might still try to append.
      expect(second.fencing_token).toBeGreaterThan(first.fencing_token);
      expect(sim.watchers).toBe(1);
    },
  );
});
