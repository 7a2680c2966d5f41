/**
 * A partitioned owner's appends that reach Redis late: the owner's traffic to Redis is held
 * in the network (a proxy that buffers it) while the capsule keeps writing; its lease expires, the
 * other replica takes over with a newer token and replays the capsule from the stored tail; then the
 * held commands are delivered. append.lua must refuse them by the fencing token: the log equals what
 * the capsule wrote, nothing duplicated. (Without the fence, the held batches land after the new
 * owner's and repeat its frames.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rendezvous } from '../../src/fleet/replicas.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { compareLog, readAll } from '../upstream/log-vs-written.js';
import { replica, until, untilSentinelLogged, type Replica } from './fleet-rig.js';
import { startHoldProxy, type HoldProxy } from './hold-proxy.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const LEASE = { ttlMs: 2000, renewMs: 400 };
// A capsule the stale-to-be replica ranks first for, so it owns it from the start.
const CAPSULE = ['late-1', 'late-2', 'late-3', 'late-4'].find(
  (c) => rendezvous(c, ['d-a', 'd-b']) === 'd-a',
)!;

describe.skipIf(!haveRedis)('a partitioned owner whose appends reach Redis after a takeover', () => {
  let redis: RedisServer;
  let hold: HoldProxy;
  let sim: SimulatedCapsule;
  let store: RedisStore;
  let a: Replica;
  let b: Replica;
  let stopWorkload = false;
  let workload: Promise<void> = Promise.resolve();

  beforeAll(async () => {
    redis = await startRedisServer();
    hold = await startHoldProxy(Number(new URL(redis.url).port));
    sim = await startSimulator({ taskAcceptance: 'queue' });
    store = new RedisStore(redis.url, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
    const capsules = [{ id: CAPSULE, url: sim.url }];
    a = await replica('d-a', hold.url, capsules, LEASE);
    b = await replica('d-b', redis.url, capsules, LEASE);
    await Promise.all([a.proc.start(), b.proc.start()]);
  }, 30_000);

  afterAll(async () => {
    stopWorkload = true;
    await workload;
    await Promise.all([a?.proc.kill(), b?.proc.kill()]);
    await store?.close();
    await hold?.close();
    await sim?.stop();
    await redis?.stop();
  });

  it('the held appends are refused by the fence; no duplicate', { timeout: 45_000 }, async () => {
    const first = await until('d-a owning', async () => {
      const row = await b.row(CAPSULE);
      return row.owner === a.id && sim.watchers === 1 ? row : null;
    });
    workload = (async () => {
      for (let i = 0; !stopWorkload && i < 10_000; i++) {
        await sim.submit(`#sim ${JSON.stringify({ chunks: 20, thinking: 2, delayMs: 10 })}`).done;
      }
    })();
    await until('frames logged', async () => (await store.position(CAPSULE)).head > first.head_offset + 50);

    hold.hold();
    const taken = await until('the takeover', async () => {
      const row = await b.row(CAPSULE);
      return row.owner === b.id && row.fencing_token > first.fencing_token ? row : null;
    });
    const head = (await store.position(CAPSULE)).head;
    await until('the new owner appending', async () => (await store.position(CAPSULE)).head > head + 50);
    expect(sim.watchers).toBe(1); // d-a stopped its watch on its own (renewals unanswered)

    hold.release(); // the held batches reach Redis now, after the new owner's

    stopWorkload = true;
    await workload;
    await untilSentinelLogged(sim, store, CAPSULE);
    const result = compareLog(await readAll(store, CAPSULE), sim.written);
    expect(result.problems).toEqual([]);
    // The stale owner was told (a retried batch's FENCED reply): it stopped, it did not retry forever.
    const fenced = await until(
      'd-a told its appends were fenced',
      async () => a.proc.output.filter((l) => l.includes('append fenced')).length,
    );
    process.stderr.write(`[delayed-append] ${fenced} fenced batch(es); ${result.matched} frames matched\n`);
    expect(taken.fencing_token).toBeGreaterThan(first.fencing_token);
  });
});
