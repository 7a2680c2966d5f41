/**
 * Capsules added and removed live across a fleet, one body for every Redis
 * kind (admin-fleet.test.ts on one redis-server, cluster-fleet.test.ts on a 3-master Cluster): three
 * replicas as processes with the default lease and registry timing; `PUT /admin/capsules/{id}` on
 * one → some replica ingests it (its /capsules row names an owner whose upstream is connected, the
 * capsule sees one watch, a task's frames reach the log every replica serves) → `DELETE` on another
 * → nobody watches it, every replica answers 404 for it, and a later task is not logged. The times
 * from PUT to the first watch and from DELETE to the last 404 are measured and reported, not asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { scaled, TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import type { FleetRedis, FleetRedisKind } from './fleet-redis.js';
import { replica, until, type Replica } from './fleet-rig.js';

const TOKEN = 'adm_fleet_scenario_token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const CAPSULE = 'added-live';

interface PolledRecord {
  kind: string;
  data?: string;
}

export const adminScenario = (kind: FleetRedisKind): void => {
  describe.skipIf(kind.skip)(`admin API on ${kind.label}: a capsule added and removed live`, () => {
    let redis: FleetRedis;
    let sim: SimulatedCapsule;
    let store: RedisStore;
    let replicas: Replica[] = [];

    beforeAll(async () => {
      redis = await kind.start();
      sim = await startSimulator();
      store = new RedisStore(redis.config, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
      const extra = { auth: { adminTokens: [{ sha256: sha256Hex(TOKEN) }] } };
      replicas = await Promise.all(
        ['m-a', 'm-b', 'm-c'].map((id) => replica(id, redis.config, [], undefined, extra)),
      );
      await Promise.all(replicas.map((r) => r.proc.start()));
    }, 30_000);

    afterAll(async () => {
      await Promise.all(replicas.map((r) => r.proc.kill()));
      await store?.close();
      await sim?.stop();
      await redis?.stop();
    });

    /** Resolves with the ms from now to the next time the capsule's watch count satisfies `ok`. */
    const watchersReach = (ok: (n: number) => boolean): Promise<number> => {
      const from = Date.now();
      return new Promise((resolve) => {
        const on = (n: number): void => {
          if (!ok(n)) return;
          sim.off('watchers', on);
          resolve(Date.now() - from);
        };
        sim.on('watchers', on);
      });
    };

    const poll = (r: Replica): Promise<Response> =>
      fetch(`${r.url}/murmur/${CAPSULE}/poll?after=0&limit=1000`, {
        signal: AbortSignal.timeout(scaled(3000)),
      });

    it('PUT on one replica → some replica ingests it; DELETE on another → nobody, 404 everywhere', async () => {
      const [a, , c] = replicas as [Replica, Replica, Replica];
      let maxWatchers = 0;
      sim.on('watchers', (n: number) => (maxWatchers = Math.max(maxWatchers, n)));
      for (const r of replicas) expect((await poll(r)).status).toBe(404);

      const watched = watchersReach((n) => n >= 1);
      const putAt = Date.now();
      const put = await fetch(`${a.url}/admin/capsules/${CAPSULE}`, {
        method: 'PUT',
        headers: admin,
        body: JSON.stringify({ url: sim.url }),
      });
      expect(put.status).toBe(201);
      const toWatch = await watched;

      // Ingesting: every replica names the same owner, a live replica whose upstream is connected.
      const owner = await until('an owner, connected, named alike by every replica', async () => {
        const rows = await Promise.all(replicas.map((r) => r.row(CAPSULE)));
        const named = rows[0]!.owner;
        if (!named || rows.some((row) => row.owner !== named)) return null;
        const holder = replicas.find((r) => r.id === named);
        if (!holder || (await holder.row(CAPSULE)).upstream !== 'connected') return null;
        return holder;
      });
      const toAllListed = Date.now() - putAt;
      const task = sim.submit('hello from the admin API');
      await task.done;
      for (const r of replicas) {
        await until(`${r.id} serves the task's frames`, async () => {
          const res = await poll(r);
          if (res.status !== 200) return null;
          const body = (await res.json()) as { records: PolledRecord[] };
          return body.records.some((rec) => rec.kind === 'frame' && rec.data?.includes(task.taskId));
        });
      }

      const unwatched = watchersReach((n) => n === 0);
      const deleteAt = Date.now();
      const del = await fetch(`${c.url}/admin/capsules/${CAPSULE}`, { method: 'DELETE', headers: admin });
      expect(del.status).toBe(204);
      const toUnwatch = await unwatched;
      for (const r of replicas) {
        await until(
          `${r.id} answers 404 for the removed capsule`,
          async () => (await poll(r)).status === 404,
        );
        const entry = await fetch(`${r.url}/admin/capsules/${CAPSULE}`, { headers: admin });
        expect(entry.status).toBe(404);
        const listed = (await r.view()).capsules.some((row) => row.id === CAPSULE);
        expect(listed).toBe(false);
      }
      const toAll404 = Date.now() - deleteAt;

      // Nobody ingests it any more: a task the capsule runs now never reaches the log.
      const head = (await store.position(CAPSULE)).head;
      const after = sim.submit('nobody is watching');
      await after.done;
      expect(sim.watchers).toBe(0);
      expect((await store.position(CAPSULE)).head).toBe(head);
      expect(maxWatchers).toBe(1);
      process.stderr.write(
        `[admin ${kind.label}] PUT on ${a.id} → first watch by ${owner.id} after ${toWatch} ms ` +
          `(owner connected and named by every replica after ${toAllListed} ms); ` +
          `DELETE on ${c.id} → watch closed after ${toUnwatch} ms, 404 on every replica after ${toAll404} ms\n`,
      );
    });
  });
};
