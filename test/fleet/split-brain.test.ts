/**
 * The classic GC-pause split brain: two replicas on one Redis, the owner SIGSTOPped past its
 * lease while the capsule keeps writing, the other replica takes the capsule over with a newer token,
 * then the stale owner wakes up (SIGCONT) with frames still in its socket. Its appends must be refused
 * by the fence and its watch closed: the log equals what the capsule wrote, nothing duplicated.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { compareLog, readAll } from '../upstream/log-vs-written.js';
import { replica, until, untilSentinelLogged, type Replica } from './fleet-rig.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const CAPSULE = 'brain';
const LEASE = { ttlMs: 2000, renewMs: 400 };

describe.skipIf(!haveRedis)('split brain: a paused owner wakes up after a takeover', () => {
  let redis: RedisServer;
  let sim: SimulatedCapsule;
  let store: RedisStore;
  let replicas: Replica[] = [];
  let stopWorkload = false;
  let workload: Promise<void> = Promise.resolve();

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator({ taskAcceptance: 'queue' });
    store = new RedisStore(redis.url, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
    const capsules = [{ id: CAPSULE, url: sim.url }];
    replicas = [
      await replica('r-a', redis.url, capsules, LEASE),
      await replica('r-b', redis.url, capsules, LEASE),
    ];
    await Promise.all(replicas.map((r) => r.proc.start()));
  }, 30_000);

  afterAll(async () => {
    stopWorkload = true;
    await workload;
    await Promise.all(replicas.map((r) => r.proc.kill()));
    await store?.close();
    await sim?.stop();
    await redis?.stop();
  });

  it(
    'the stale owner is fenced: no duplicate, its watch closes, it says it no longer owns',
    { timeout: 45_000 },
    async () => {
      let maxWatchers = sim.watchers;
      sim.on('watchers', (n: number) => (maxWatchers = Math.max(maxWatchers, n)));
      const first = await until('an owner', async () => {
        const row = await replicas[0]!.row(CAPSULE);
        return row.owner !== null && sim.watchers === 1 ? row : null;
      });
      const owner = replicas.find((r) => r.id === first.owner)!;
      const other = replicas.find((r) => r.id !== first.owner)!;
      expect(maxWatchers).toBe(1);

      workload = (async () => {
        for (let i = 0; !stopWorkload && i < 10_000; i++) {
          await sim.submit(`#sim ${JSON.stringify({ chunks: 20, thinking: 2, delayMs: 10 })}`).done;
        }
      })();
      await until('frames logged', async () => (await store.position(CAPSULE)).head > first.head_offset + 50);

      // Paused past its lease: the other replica takes over with a newer token.
      owner.proc.pause();
      const paused = Date.now();
      const taken = await until('the takeover', async () => {
        const row = await other.row(CAPSULE);
        return row.owner === other.id && row.fencing_token > first.fencing_token ? row : null;
      });
      const takeoverMs = Date.now() - paused;
      // Let the capsule write more while the stale owner sleeps (its socket keeps receiving frames).
      const head = (await store.position(CAPSULE)).head;
      await until('the new owner appending', async () => (await store.position(CAPSULE)).head > head + 50);

      owner.proc.resume();
      // It learns (renew refused, or an append fenced), stops ingesting and closes its watch.
      await until('one watcher again', async () => sim.watchers === 1);
      // It stands down; it may then legitimately take the capsule back, since it ranks first for it
      // again once its heartbeat is live (a hand-over with a newer token): either state says it
      // no longer ingests on the token that was taken from it.
      await until('the stale owner standing down', async () => {
        const row = await owner.row(CAPSULE);
        if (row.owner === other.id && row.upstream === 'stopped') return row;
        if (row.owner === owner.id && row.fencing_token > taken.fencing_token) return row;
        return null;
      });
      expect(owner.proc.output.some((l) => l.includes('capsule lost'))).toBe(true);

      stopWorkload = true;
      await workload;
      await untilSentinelLogged(sim, store, CAPSULE);
      const records = await readAll(store, CAPSULE);
      const result = compareLog(records, sim.written);
      expect(result.problems).toEqual([]);
      const fencedAppends = owner.proc.output.filter((l) => l.includes('append fenced')).length;
      const overdue = owner.proc.output.filter((l) => l.includes('lease renewal overdue')).length;
      process.stderr.write(
        `[split-brain] takeover ${takeoverMs} ms after SIGSTOP (ttl ${LEASE.ttlMs} ms); stale owner: ` +
          `${fencedAppends} fenced append(s), ${overdue} watchdog stop(s); max watchers while paused ${maxWatchers}; ` +
          `${result.matched} frames matched, ${result.covered.length} covered by facts\n`,
      );
    },
  );
});
