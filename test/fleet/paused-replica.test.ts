/**
 * A replica whose whole process stops for longer than `store.unreachableAfterMs` (SIGSTOP, as a long
 * pause or a starved CPU would) while its Redis never went away keeps its readers: its follower is
 * not ended (no reconnect), gets every frame the capsule wrote meanwhile exactly once, and the
 * replica never says the store was unreachable. The lease outlives the pause, so the replica stays
 * the owner.
 */
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { atTestEnd } from '../support/stop-after-test.js';
import { compareLog, isFinalStatusOf, readAll } from '../upstream/log-vs-written.js';
import { replica, until, type Replica } from './fleet-rig.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const CAPSULE = 'paused';
/** The pause outlasts every store deadline, ioredis's command and socket timeouts too. */
const STORE = { probeMs: 100, unreachableAfterMs: 500, commandTimeoutMs: 300 };
/** Far longer than the pause, however slow the machine: the lease, judged by the wall clock, holds. */
const LEASE = { ttlMs: 20_000, renewMs: 1000 };

interface Followed {
  offset: number;
  kind: string;
  data?: string;
}

describe.skipIf(!haveRedis)('a replica paused past unreachableAfterMs keeps its readers', () => {
  let redis: RedisServer;
  let sim: SimulatedCapsule;
  let store: RedisStore;
  let gw: Replica;

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator({ taskAcceptance: 'queue' });
    store = new RedisStore(redis.url);
    gw = await replica('r-paused', redis.url, [{ id: CAPSULE, url: sim.url }], LEASE, { store: STORE });
    await gw.proc.start();
  }, 30_000);

  afterAll(async () => {
    await gw?.proc.kill();
    await store?.close();
    await sim?.stop();
    await redis?.stop();
  });

  it('its follower stays connected and gets every frame; the store is never called unreachable', async () => {
    await until('the capsule owned and watched', async () => {
      const row = await gw.row(CAPSULE);
      return row.owner === gw.id && sim.watchers === 1 ? row : null;
    });
    const first = sim.submit('#sim {"chunks":5,"delayMs":1}');
    await first.done;

    const followed: Followed[] = [];
    let opens = 0;
    let errors = 0;
    const es = new EventSource(`${gw.url}/murmur/${CAPSULE}/records?after=0`);
    atTestEnd(() => es.close());
    es.addEventListener('open', () => opens++);
    es.addEventListener('error', () => errors++);
    const seen = (test: (r: Followed) => boolean): Promise<void> =>
      new Promise((resolve) => {
        const on = (e: MessageEvent): void => {
          if (test(JSON.parse(e.data as string) as Followed)) {
            es.removeEventListener('record', on);
            resolve();
          }
        };
        if (followed.some(test)) resolve();
        else es.addEventListener('record', on);
      });
    es.addEventListener('record', (e: MessageEvent) =>
      followed.push(JSON.parse(e.data as string) as Followed),
    );
    const finalOf =
      (taskId: string) =>
      (r: Followed): boolean =>
        r.kind === 'frame' && (r.data ?? '').includes(taskId) && (r.data ?? '').includes('"final":true');
    await seen(finalOf(first.taskId));

    // The whole process stops while the capsule writes a task of about 1.5 s (three times
    // unreachableAfterMs); its frames wait in the replica's socket.
    gw.proc.pause();
    atTestEnd(() => gw.proc.resume());
    const during = sim.submit('#sim {"chunks":60,"delayMs":25}');
    await during.done;
    gw.proc.resume();
    await seen(finalOf(during.taskId));

    expect(errors).toBe(0);
    expect(opens).toBe(1);
    expect(gw.proc.output.filter((l) => l.includes('store unreachable'))).toEqual([]);
    expect((await gw.row(CAPSULE)).owner).toBe(gw.id);

    // Nothing lost: the log holds what the capsule wrote, and the follower had the log, once each.
    const records = await readAll(store, CAPSULE);
    expect(records.some((r) => isFinalStatusOf(r, during.taskId))).toBe(true);
    expect(compareLog(records, sim.written).problems).toEqual([]);
    const upTo = followed[followed.length - 1]!.offset;
    expect(followed.map((r) => r.offset)).toEqual(
      records.filter((r) => r.offset <= upTo).map((r) => r.offset),
    );
  }, 45_000);
});
