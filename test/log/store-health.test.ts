/**
 * The store probe against a real redis-server: silence this process slept through (its event loop
 * blocked, as by a long pause or a starved CPU) is not taken for an unreachable store, while a
 * redis-server that stops answering (SIGSTOP) is still found unreachable, stall or not, and reachable
 * again once it answers.
 */
import { EventEmitter, once } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreHealth } from '../../src/log/store-health.js';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { atTestEnd } from '../support/stop-after-test.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const PROBE_MS = 100;
const UNREACHABLE_AFTER_MS = 500;

/** Blocks this thread's event loop for `ms`: no timer runs and no socket is read meanwhile. */
const stallLoop = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

describe.skipIf(!haveRedis)('store health: only silence heard while awake counts', () => {
  let redis: RedisServer;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedisServer();
    client = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  });

  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  /** A StoreHealth on the real client, its changes recorded, and an event per answered probe. */
  const probed = (): {
    health: StoreHealth;
    changes: boolean[];
    answers: (n: number) => Promise<void>;
    change: () => Promise<boolean>;
  } => {
    const events = new EventEmitter();
    const health = new StoreHealth({
      ping: async () => {
        const ok = (await client.ping()) === 'PONG';
        events.emit('answer');
        return ok;
      },
      probeMs: PROBE_MS,
      unreachableAfterMs: UNREACHABLE_AFTER_MS,
    });
    const changes: boolean[] = [];
    health.onChange((reachable) => {
      changes.push(reachable);
      events.emit('change', reachable);
    });
    health.start();
    atTestEnd(() => health.close());
    return {
      health,
      changes,
      // Resolves once the n-th answer from now has been taken in (the probe's own callbacks done).
      answers: async (n) => {
        for (let i = 0; i < n; i++) await once(events, 'answer');
        await new Promise((r) => setImmediate(r));
      },
      change: async () => ((await once(events, 'change')) as [boolean])[0],
    };
  };

  it('a stall of three times unreachableAfterMs leaves the store reachable: its answer was waiting', async () => {
    const { health, changes, answers } = probed();
    await answers(1);
    stallLoop(3 * UNREACHABLE_AFTER_MS);
    // The first ticks after the stall judge it; the probes after them answer.
    await answers(3);
    expect(changes).toEqual([]);
    expect(health.reachable).toBe(true);
  });

  it('a redis-server that stops answering is found unreachable, and reachable again when it answers', async () => {
    const { health, changes, answers, change } = probed();
    await answers(1);
    const lastAnswer = Date.now();
    redis.pause();
    atTestEnd(() => redis.resume());
    expect(await change()).toBe(false);
    // Not before its silence lasted unreachableAfterMs (the last answer may precede the pause).
    expect(Date.now() - lastAnswer).toBeGreaterThanOrEqual(UNREACHABLE_AFTER_MS);
    expect(health.reachable).toBe(false);
    redis.resume();
    expect(await change()).toBe(true);
    expect(changes).toEqual([false, true]);
  });

  it('an outage the process stalls through is still found once it has listened unreachableAfterMs', async () => {
    const { health, changes, answers, change } = probed();
    await answers(1);
    redis.pause();
    atTestEnd(() => redis.resume());
    stallLoop(3 * UNREACHABLE_AFTER_MS);
    const awake = Date.now();
    expect(await change()).toBe(false);
    // The stall is not counted: the silence that decides is heard after it.
    expect(Date.now() - awake).toBeGreaterThanOrEqual(UNREACHABLE_AFTER_MS - 2 * PROBE_MS);
    expect(health.reachable).toBe(false);
    redis.resume();
    expect(await change()).toBe(true);
    expect(changes).toEqual([false, true]);
  });
});
