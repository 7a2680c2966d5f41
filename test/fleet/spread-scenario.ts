/**
 * Spread and bounded handovers, one body for every Redis kind (spread.test.ts on one
 * redis-server, cluster-fleet.test.ts on a 3-master Cluster): nine capsules over three replicas (rendezvous hashing on
 * the live replica set) → every replica owns some; a fourth replica joins → only the capsules it now
 * ranks first for move (graceful handovers, counted); one replica stops with SIGTERM → it releases
 * its leases before draining and its capsules are taken over at once (timed, reported). Every capsule
 * has one gateway watch at a time throughout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rendezvous } from '../../src/fleet/replicas.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import type { FleetRedis, FleetRedisKind } from './fleet-redis.js';
import { ownersOf, replica, until, type Replica } from './fleet-rig.js';

const FIRST = ['s-a', 's-b', 's-c'];
const ALL = [...FIRST, 's-d'];

// Nine capsule ids the three first replicas share three by three (HRW is deterministic).
const CAPSULES = (() => {
  const count = new Map<string, number>();
  const ids: string[] = [];
  for (let i = 0; ids.length < 9; i++) {
    const id = `cap-${i}`;
    const owner = rendezvous(id, FIRST);
    if ((count.get(owner) ?? 0) >= 3) continue;
    count.set(owner, (count.get(owner) ?? 0) + 1);
    ids.push(id);
  }
  return ids;
})();

export const spreadScenario = (kind: FleetRedisKind): void => {
  describe.skipIf(kind.skip)(`spread on ${kind.label}: HRW over live replicas, join and SIGTERM`, () => {
    let redis: FleetRedis;
    const sims = new Map<string, SimulatedCapsule>();
    let replicas: Replica[] = [];
    let maxWatchers = 0;

    beforeAll(async () => {
      redis = await kind.start();
      for (const id of CAPSULES) {
        const sim = await startSimulator();
        sim.on('watchers', (n: number) => (maxWatchers = Math.max(maxWatchers, n)));
        sims.set(id, sim);
      }
      const capsules = CAPSULES.map((id) => ({ id, url: sims.get(id)!.url }));
      replicas = await Promise.all(ALL.map((id) => replica(id, redis.config, capsules)));
    });

    afterAll(async () => {
      await Promise.all(replicas.map((r) => r.proc.kill()));
      await Promise.all([...sims.values()].map((s) => s.stop()));
      await redis?.stop();
    });

    /** Owners as `asker` reports them, once they are what HRW over `live` says and every capsule has one watch. */
    const settled = (asker: Replica, live: string[]): Promise<Map<string, string | null>> =>
      until(`owners = HRW over ${live.join(',')}`, async () => {
        const owners = await ownersOf(asker);
        const ok = CAPSULES.every(
          (c) => owners.get(c) === rendezvous(c, live) && sims.get(c)!.watchers === 1,
        );
        return ok ? owners : null;
      });

    it(
      'spreads, moves ~1/N on a join, hands a stopped replica’s capsules over at once',
      { timeout: 60_000 },
      async () => {
        const [a, b, c, d] = replicas as [Replica, Replica, Replica, Replica];
        await Promise.all([a, b, c].map((r) => r.proc.start()));
        const before = await settled(a, FIRST);
        for (const r of FIRST) expect([...before.values()].filter((o) => o === r).length).toBeGreaterThan(0);

        const joinedAt = Date.now();
        await d.proc.start();
        const after = await settled(a, ALL);
        const joinMs = Date.now() - joinedAt;
        const moved = CAPSULES.filter((id) => before.get(id) !== after.get(id));
        // Only what the newcomer wins moves: nothing is reshuffled between the others.
        expect(moved.every((id) => after.get(id) === d.id)).toBe(true);

        // SIGTERM b: its capsules are released before it drains, and taken over at once.
        const leaving = CAPSULES.filter((id) => after.get(id) === b.id);
        const stoppedAt = Date.now();
        const reopened = leaving.map(
          (id) =>
            new Promise<number>((resolve) => {
              const sim = sims.get(id)!;
              const on = (n: number): void => {
                if (n < 1) return;
                sim.off('watchers', on);
                resolve(Date.now() - stoppedAt);
              };
              sim.on('watchers', on);
            }),
        );
        await b.proc.stop();
        const moveMs = await Promise.all(reopened);
        const survivors = ALL.filter((id) => id !== b.id);
        const final = await settled(a, survivors);
        const movedOnStop = CAPSULES.filter((id) => after.get(id) !== final.get(id));
        expect(movedOnStop.sort()).toEqual([...leaving].sort());
        expect(maxWatchers).toBe(1);
        const count = (m: Map<string, string | null>, r: string): number =>
          [...m.values()].filter((o) => o === r).length;
        process.stderr.write(
          `[spread ${kind.label}] 9 capsules over 3 replicas: ${FIRST.map((r) => `${r}=${count(before, r)}`).join(' ')}; ` +
            `s-d joined: ${moved.length} handover(s) (settled in ${joinMs} ms incl. process start); ` +
            `SIGTERM ${b.id}: its ${leaving.length} capsule(s) watched again after ${moveMs.join(', ')} ms; ` +
            `final ${survivors.map((r) => `${r}=${count(final, r)}`).join(' ')}\n`,
        );
      },
    );
  });
};
