/**
 * Leases and the fence on real Redis: acquiring mints a token that only grows; renew and release
 * compare the exact value; an append stamped with an older token is refused (nothing written), and the
 * writer drops that term's frames, re-sends its submissions unfenced and tells its listener.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseStore } from '../../src/fleet/lease.js';
import { rendezvous } from '../../src/fleet/replicas.js';
import { LogWriter } from '../../src/log/log-writer.js';
import type { LogEntry } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { fenced } from '../../src/log/store.js';
import { redisServerAvailable, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { readAll } from '../upstream/log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

const frame = (n: number): LogEntry => ({
  kind: 'frame',
  event: 'text',
  upstreamId: String(n),
  data: `{"n":${n}}`,
  receivedAt: Date.now(),
});

describe.skipIf(!haveRedis)('leases and the fencing token', () => {
  let redis: RedisServer;
  let store: RedisStore;

  beforeAll(async () => {
    redis = await startRedisServer();
    store = new RedisStore(redis.url);
    expect(await store.ping()).toBe(true);
  });
  afterAll(async () => {
    await store?.close();
    await redis?.stop();
  });

  it('one holder at a time; the token grows with every acquisition; compare-and-renew/delete', async () => {
    const a = new LeaseStore(store.connection.client, 'a', 300);
    const b = new LeaseStore(store.connection.client, 'b', 300);
    const held = await a.acquire('c1');
    expect(held).not.toBeNull();
    expect(await b.acquire('c1')).toBeNull();
    expect(await a.renew(held!)).toBe(true);
    expect(await b.peek('c1')).toEqual({ owner: 'a', fence: held!.fence });
    // Expired: b takes it with a higher token; a can neither renew nor release b's lease.
    await new Promise((r) => setTimeout(r, 400));
    const taken = await b.acquire('c1');
    expect(taken!.fence).toBeGreaterThan(held!.fence);
    expect(await a.renew(held!)).toBe(false);
    expect(await a.release(held!)).toBe(false);
    expect((await a.peek('c1')).owner).toBe('b');
    expect(await b.release(taken!)).toBe(true);
    expect((await a.peek('c1')).owner).toBeNull();
  });

  it('append.lua refuses an older token and writes nothing', async () => {
    const a = new LeaseStore(store.connection.client, 'a', 5000);
    const first = (await a.acquire('c2'))!;
    await store.append('c2', [frame(1)], { fence: first.fence });
    await a.release(first);
    const second = (await a.acquire('c2'))!;
    const err = await store.append('c2', [frame(2)], { fence: first.fence }).catch((e: unknown) => e);
    expect(fenced(err)).toBe(true);
    await store.append('c2', [frame(3)], { fence: second.fence });
    await store.append('c2', [frame(4)]); // unfenced (a submission's batch) always goes
    const ids = (await readAll(store, 'c2')).map((r) => (r.kind === 'frame' ? r.upstreamId : r.kind));
    expect(ids).toEqual(['1', '3', '4']);
  });

  it('the writer drops a fenced term, re-sends its submissions unfenced, and says so', async () => {
    const a = new LeaseStore(store.connection.client, 'a', 5000);
    const b = new LeaseStore(store.connection.client, 'b', 5000);
    const old = (await a.acquire('c3'))!;
    const writer = new LogWriter(store, { retryBaseMs: 5 });
    const refusals: [string, number][] = [];
    writer.onFenced((capsule, fence) => refusals.push([capsule, fence]));
    writer.setFence('c3', old.fence);
    await writer.append('c3', frame(1));
    // Another replica takes over (the old lease expired while this one was paused).
    await store.connection.client.del(a.keys('c3').lease);
    await b.acquire('c3');
    const late = writer.append('c3', frame(2));
    const submission = writer.append('c3', {
      kind: 'submission',
      protocol: 'murmur',
      owner: null,
      text: 'hello',
      contextId: 'ctx',
      messageId: 'm1',
      receivedAt: Date.now(),
    });
    await expect(late).rejects.toMatchObject({ details: { fenced: true } });
    await submission;
    await writer.flush('c3');
    expect(refusals).toEqual([['c3', old.fence]]);
    const kinds = (await readAll(store, 'c3')).map((r) => (r.kind === 'frame' ? r.upstreamId : r.kind));
    expect(kinds).toEqual(['1', 'submission']);
    await writer.close();
  });

  it('a replica that re-acquires its own lapsed lease (nobody in between) keeps its queued entries', async () => {
    const a = new LeaseStore(store.connection.client, 'a', 5000);
    const first = (await a.acquire('c4'))!;
    const writer = new LogWriter(store);
    const refusals: number[] = [];
    writer.onFenced((_, fence) => refusals.push(fence));
    writer.setFence('c4', first.fence);
    await writer.append('c4', frame(1));
    await a.release(first); // the lease lapsed (a Redis outage longer than the TTL)
    const again = (await a.acquire('c4'))!;
    expect(again.previous).toBe(first.fence); // nobody held it in between
    // Queued under the old token while this replica could not reach Redis, then adopted.
    const queued = [writer.append('c4', frame(2)), writer.append('c4', frame(3))];
    writer.setFence('c4', again.fence, { adopt: first.fence });
    await Promise.all(queued);
    expect(refusals).toEqual([]);
    const ids = (await readAll(store, 'c4')).map((r) => (r.kind === 'frame' ? r.upstreamId : r.kind));
    expect(ids).toEqual(['1', '2', '3']);
    await writer.close();
  });

  it('rendezvous moves only the capsules a joining replica wins', () => {
    const ids = Array.from({ length: 300 }, (_, i) => `cap-${i}`);
    const before = ids.map((c) => rendezvous(c, ['r1', 'r2', 'r3']));
    const after = ids.map((c) => rendezvous(c, ['r1', 'r2', 'r3', 'r4']));
    const moved = ids.filter((_, i) => before[i] !== after[i]);
    expect(moved.every((_, i) => after[ids.indexOf(moved[i]!)] === 'r4')).toBe(true);
    expect(moved.length).toBeGreaterThan(30);
    expect(moved.length).toBeLessThan(120);
  });
});
