/**
 * Forks of general streams on real Redis, beyond the conformance suite: a fork read after Redis
 * comes back from an older snapshot (offsets only grow; the fork's past epoch is 410, its source's
 * offsets up to the fork point still name the inherited data), a fork on one replica served by
 * another, and which keys carry a Redis expiry (a source's messages outlive it while forks read them).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { TestGateway } from '../../support/gateway.js';
import { redisServerAvailable } from '../../support/redis-server.js';
import { testRedisUrl } from '../../support/redis.js';
import { append, epochOf, streamsRedisRig, text } from './streams-redis-rig.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

const { redis: ownRedis, start, restart } = streamsRedisRig();

const fork = (source: string, more: Record<string, string> = {}) => ({
  method: 'PUT',
  headers: { ...text, 'stream-forked-from': `/v1/stream/${source}`, ...more },
});

describe.skipIf(!haveRedis)('general stream forks across a Redis rollback', () => {
  it("serve a fork at a new epoch after a restart from an older snapshot; the source's offsets still resume", async () => {
    const redis = await ownRedis();
    const gw = await start(redis.url, 'test:ds:fork-rollback');
    const src = `${gw.baseUrl}/v1/stream/src`;
    const forked = `${gw.baseUrl}/v1/stream/forked`;
    expect((await fetch(src, { method: 'PUT', headers: text, body: 'a' })).status).toBe(201);
    const forkPoint = await append(src, 'b');
    expect((await fetch(forked, fork('src'))).status).toBe(201);
    const kept = await append(forked, 'c');
    await redis.snapshot();
    const lost = await append(forked, 'd');

    await restart(redis, gw);

    const head = await fetch(forked, { method: 'HEAD' });
    expect(head.status).toBe(200);
    const tail = head.headers.get('stream-next-offset')!;
    expect(tail > lost).toBe(true);
    expect(epochOf(tail)).toBeGreaterThan(epochOf(lost));
    for (const old of [lost, kept]) expect((await fetch(`${forked}?offset=${old}`)).status).toBe(410);
    // The source's offset at the fork point names the same inherited messages as before.
    const resumed = await fetch(`${forked}?offset=${forkPoint}`);
    expect(resumed.status).toBe(200);
    expect(await resumed.text()).toBe('c');
    expect(resumed.headers.get('stream-next-offset')).toBe(tail);
    expect(await (await fetch(`${forked}?offset=-1`)).text()).toBe('abc');
    const next = await append(forked, 'e');
    expect(next > lost).toBe(true);
  });
});

describe.skipIf(!haveRedis)('general stream forks on two replicas sharing one Redis', () => {
  it('fork on one, read and long-poll on the other; a soft delete on one is 410 on both', async () => {
    const redisUrl = testRedisUrl()!;
    const prefix = `test:ds:${randomUUID()}`;
    const a = await start(redisUrl, prefix);
    const b = await start(redisUrl, prefix);
    const on = (gw: TestGateway, p: string): string => `${gw.baseUrl}/v1/stream/${p}`;
    expect((await fetch(on(a, 'src'), { method: 'PUT', headers: text, body: 'a' })).status).toBe(201);
    expect((await fetch(on(a, 'forked'), fork('src'))).status).toBe(201);

    const first = await fetch(`${on(b, 'forked')}?offset=-1`);
    expect(await first.text()).toBe('a');
    const tail = first.headers.get('stream-next-offset')!;
    // B waits at the fork's tail: the source's append does not wake it with data, A's fork append does.
    const startedAt = Date.now();
    const waiting = fetch(`${on(b, 'forked')}?offset=${tail}&live=long-poll`);
    await append(on(a, 'src'), 'not-inherited');
    await append(on(a, 'forked'), 'f');
    const woken = await waiting;
    expect(woken.status).toBe(200);
    expect(await woken.text()).toBe('f');
    expect(Date.now() - startedAt).toBeLessThan(10_000);

    expect((await fetch(on(b, 'src'), { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(on(a, 'src'), { method: 'HEAD' })).status).toBe(410);
    expect((await fetch(on(a, 'src'), { method: 'PUT', headers: text })).status).toBe(409);
    expect(await (await fetch(`${on(a, 'forked')}?offset=-1`)).text()).toBe('af');
    expect((await fetch(on(a, 'forked'), { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(on(b, 'src'), { method: 'HEAD' })).status).toBe(404);
  });
});

describe.skipIf(!haveRedis)('general stream forks and Redis key expiry', () => {
  it("lift a source's key expiry while it has forks, and give it back when they go", async () => {
    const redisUrl = testRedisUrl()!;
    const prefix = `test:ds:${randomUUID()}`;
    const gw = await start(redisUrl, prefix);
    const raw = new Redis(redisUrl);
    const pttl = (p: string): Promise<number> => raw.pttl(`${prefix}:{streams}:m:${p}`);
    try {
      const src = `${gw.baseUrl}/v1/stream/src`;
      const ttl = { ...text, 'stream-ttl': '600' };
      expect((await fetch(src, { method: 'PUT', headers: ttl, body: 'a' })).status).toBe(201);
      expect(await pttl('src')).toBeGreaterThan(0);
      expect((await fetch(`${gw.baseUrl}/v1/stream/forked`, fork('src'))).status).toBe(201);
      // The fork inherited the TTL, and expires by the scripts (releasing its source), not by Redis.
      expect(
        (await fetch(`${gw.baseUrl}/v1/stream/forked`, { method: 'HEAD' })).headers.get('stream-ttl'),
      ).toBe('600');
      expect(await pttl('forked')).toBe(-1);
      expect(await pttl('src')).toBe(-1);
      expect((await fetch(`${gw.baseUrl}/v1/stream/forked`, { method: 'DELETE' })).status).toBe(204);
      expect(await pttl('src')).toBeGreaterThan(0);
    } finally {
      raw.disconnect();
    }
  });
});
