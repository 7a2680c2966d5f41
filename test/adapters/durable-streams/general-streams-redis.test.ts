/**
 * General streams on real Redis: offsets never go backwards when Redis comes back from an older
 * snapshot (a new epoch; a reader holding an offset of the past one gets 410), and two gateway
 * replicas on one Redis serve the same stream (append on one, read and long-poll on the other,
 * producer state shared).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { redisServerAvailable } from '../../support/redis-server.js';
import { testRedisUrl } from '../../support/redis.js';
import { append, epochOf, streamsRedisRig, text } from './streams-redis-rig.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

const { redis: ownRedis, start, restart } = streamsRedisRig();

describe.skipIf(!haveRedis)('general streams across a Redis rollback', () => {
  it('start a new epoch when Redis restarts from an older snapshot: offsets only grow, old ones are 410', async () => {
    const redis = await ownRedis();
    const gw = await start(redis.url, 'test:ds:rollback');
    const url = `${gw.baseUrl}/v1/stream/rollback`;
    expect((await fetch(url, { method: 'PUT', headers: text, body: 'a' })).status).toBe(201);
    const kept = await append(url, 'b');
    await redis.snapshot();
    await append(url, 'c');
    const lost = await append(url, 'd');

    await restart(redis, gw);

    const head = await fetch(url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    const tail = head.headers.get('stream-next-offset')!;
    expect(tail > lost).toBe(true);
    expect(epochOf(tail)).toBeGreaterThan(epochOf(lost));
    for (const old of [lost, kept]) {
      const res = await fetch(`${url}?offset=${old}`);
      expect(res.status).toBe(410);
      expect(await res.json()).toEqual({
        error: { code: 'offset_gone', message: 'offset from an earlier epoch of this stream' },
      });
    }
    // What the snapshot held is still served, at offsets of the new epoch.
    const all = await fetch(`${url}?offset=-1`);
    expect(await all.text()).toBe('ab');
    expect(all.headers.get('stream-next-offset')).toBe(tail);
    const next = await append(url, 'e');
    expect(next > lost).toBe(true);
    expect(await (await fetch(`${url}?offset=${tail}`)).text()).toBe('e');
  });

  it('start a new epoch when Redis holds less than the gateway handed out, without a restart', async () => {
    const redisUrl = testRedisUrl()!;
    const prefix = `test:ds:${randomUUID()}`;
    const gw = await start(redisUrl, prefix);
    const url = `${gw.baseUrl}/v1/stream/shrunk`;
    expect((await fetch(url, { method: 'PUT', headers: text, body: 'a' })).status).toBe(201);
    const handedOut = await append(url, 'b');
    // A failover to a replica that lagged, as Redis would show it: the second message gone.
    const raw = new Redis(redisUrl);
    try {
      await raw.hset(`${prefix}:{streams}:m:shrunk`, 'tail', '1');
      await raw.xdel(`${prefix}:{streams}:d:shrunk`, '2-0');
    } finally {
      raw.disconnect();
    }
    const res = await fetch(`${url}?offset=${handedOut}`);
    expect(res.status).toBe(410);
    const next = await append(url, 'c');
    expect(next > handedOut).toBe(true);
    expect(await (await fetch(`${url}?offset=-1`)).text()).toBe('ac');
  });
});

describe.skipIf(!haveRedis)('general streams while Redis does not answer', () => {
  it('answer 503, and a producer retry afterwards lands exactly once', async () => {
    const redis = await ownRedis();
    const gw = await start(redis.url, 'test:ds:frozen');
    const url = `${gw.baseUrl}/v1/stream/frozen`;
    expect((await fetch(url, { method: 'PUT', headers: text })).status).toBe(201);
    const batch = {
      method: 'POST',
      headers: { ...text, 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '0' },
      body: 'once',
    };
    redis.pause();
    const refused = await fetch(url, batch);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toEqual({
      error: { code: 'unavailable', message: 'the stream store is unavailable' },
    });
    redis.resume();
    // The refused request may or may not have reached Redis: the retry is new data (200) or a duplicate (204).
    // Retried as a producer does, after Retry-After while 503: the connection that waited on the frozen
    // Redis was dropped (a command timeout retires its socket) and is opened again first.
    let retried = await fetch(url, batch);
    for (let i = 0; i < 10 && retried.status === 503; i++) {
      await new Promise((r) => setTimeout(r, Number(retried.headers.get('retry-after')) * 1000));
      retried = await fetch(url, batch);
    }
    expect([200, 204]).toContain(retried.status);
    expect(await (await fetch(`${url}?offset=-1`)).text()).toBe('once');
  });
});

describe.skipIf(!haveRedis)('general streams on two replicas sharing one Redis', () => {
  it('serve one stream: append on one, read, long-poll and producers on the other', async () => {
    const redisUrl = testRedisUrl()!;
    const prefix = `test:ds:${randomUUID()}`;
    const a = await start(redisUrl, prefix);
    const b = await start(redisUrl, prefix);
    const json = { 'content-type': 'application/json' };
    const onA = `${a.baseUrl}/v1/stream/shared`;
    const onB = `${b.baseUrl}/v1/stream/shared`;
    expect((await fetch(onA, { method: 'PUT', headers: json })).status).toBe(201);
    expect((await fetch(onA, { method: 'POST', headers: json, body: '{"n":1}' })).status).toBe(204);

    const first = await fetch(`${onB}?offset=-1`);
    expect(await first.json()).toEqual([{ n: 1 }]);
    const tail = first.headers.get('stream-next-offset')!;

    // B waits at the tail; A's append wakes it (long before B's 20 s long-poll would end).
    const startedAt = Date.now();
    const waiting = fetch(`${onB}?offset=${tail}&live=long-poll`);
    expect((await fetch(onA, { method: 'POST', headers: json, body: '{"n":2}' })).status).toBe(204);
    const woken = await waiting;
    expect(woken.status).toBe(200);
    expect(await woken.json()).toEqual([{ n: 2 }]);
    expect(Date.now() - startedAt).toBeLessThan(10_000);

    // One producer's state, whichever replica its batches reach.
    const producer = (seq: number) => ({
      ...json,
      'producer-id': 'p1',
      'producer-epoch': '0',
      'producer-seq': String(seq),
    });
    expect((await fetch(onA, { method: 'POST', headers: producer(0), body: '{"n":3}' })).status).toBe(200);
    expect((await fetch(onB, { method: 'POST', headers: producer(1), body: '{"n":4}' })).status).toBe(200);
    const retry = await fetch(onA, { method: 'POST', headers: producer(1), body: '{"n":4}' });
    expect(retry.status).toBe(204);
    expect(retry.headers.get('producer-seq')).toBe('1');
    expect(await (await fetch(`${onA}?offset=-1`)).json()).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);

    // Closed on B: A's reader at the tail learns it at once.
    const closing = fetch(
      `${onA}?offset=${(await fetch(onA, { method: 'HEAD' })).headers.get('stream-next-offset')}&live=long-poll`,
    );
    expect((await fetch(onB, { method: 'POST', headers: { 'stream-closed': 'true' } })).status).toBe(204);
    const closed = await closing;
    expect(closed.status).toBe(204);
    expect(closed.headers.get('stream-closed')).toBe('true');
  });

  it('answer many readers of the same pages exactly, and the new stream after a delete and create on the other', async () => {
    const redisUrl = testRedisUrl()!;
    const prefix = `test:ds:${randomUUID()}`;
    const a = await start(redisUrl, prefix);
    const b = await start(redisUrl, prefix);
    /** A whole catch-up from -1, page by page as a client follows Stream-Next-Offset. */
    const catchUp = async (url: string): Promise<{ body: Buffer; pages: number }> => {
      const parts: Buffer[] = [];
      let offset = '-1';
      for (let pages = 1; pages <= 20; pages++) {
        const res = await fetch(`${url}?offset=${offset}`);
        expect(res.status).toBe(200);
        parts.push(Buffer.from(await res.arrayBuffer()));
        offset = res.headers.get('stream-next-offset')!;
        if (res.headers.get('stream-up-to-date') === 'true') return { body: Buffer.concat(parts), pages };
      }
      throw new Error('no end to the catch-up');
    };
    // JSON: 2,500 messages (pages of 1,000); bytes: five of 400 kB (pages of at most 1 MiB).
    const modes = [
      {
        type: 'application/json',
        posts: (tag: string) =>
          Array.from({ length: 25 }, (_, p) =>
            JSON.stringify(Array.from({ length: 100 }, (_, i) => ({ tag, i: p * 100 + i }))),
          ),
        whole: (tag: string) =>
          Array.from({ length: 25 }, (_, p) =>
            Array.from({ length: 100 }, (_, i) => ({ tag, i: p * 100 + i })),
          )
            .flat()
            .map((m) => JSON.stringify(m)),
        shown: (pages: Buffer) => pages.toString().replaceAll('][', ','),
        pages: 3,
      },
      {
        type: 'application/octet-stream',
        posts: (tag: string) => Array.from({ length: 5 }, (_, i) => `${tag}${i}`.padEnd(400_000, String(i))),
        whole: (tag: string) => Array.from({ length: 5 }, (_, i) => `${tag}${i}`.padEnd(400_000, String(i))),
        shown: (pages: Buffer) => pages.toString(),
        pages: 3,
      },
    ];
    for (const mode of modes) {
      const path = `pages-${randomUUID()}`;
      const headers = { 'content-type': mode.type };
      const expected = (tag: string): string =>
        mode.type === 'application/json' ? `[${mode.whole(tag).join(',')}]` : mode.whole(tag).join('');
      const write = async (base: string, tag: string): Promise<void> => {
        expect((await fetch(`${base}/v1/stream/${path}`, { method: 'PUT', headers })).status).toBe(201);
        for (const body of mode.posts(tag))
          expect((await fetch(`${base}/v1/stream/${path}`, { method: 'POST', headers, body })).status).toBe(
            204,
          );
      };
      await write(a.baseUrl, 'old');
      // Eight readers at once on each replica, twice: the pages come from Redis, then from each one's cache.
      for (let pass = 0; pass < 2; pass++) {
        const reads = await Promise.all(
          [a, b].flatMap((gw) => Array.from({ length: 8 }, () => catchUp(`${gw.baseUrl}/v1/stream/${path}`))),
        );
        for (const r of reads) expect([mode.shown(r.body), r.pages]).toEqual([expected('old'), mode.pages]);
      }
      // Deleted and created again through B, with messages of the very same sizes: A reads the new ones.
      expect((await fetch(`${b.baseUrl}/v1/stream/${path}`, { method: 'DELETE' })).status).toBe(204);
      await write(b.baseUrl, 'new');
      const reads = await Promise.all(
        [a, b].flatMap((gw) => Array.from({ length: 4 }, () => catchUp(`${gw.baseUrl}/v1/stream/${path}`))),
      );
      for (const r of reads) expect(mode.shown(r.body)).toBe(expected('new'));
      expect((await fetch(`${b.baseUrl}/v1/stream/${path}`, { method: 'DELETE' })).status).toBe(204);
      expect((await fetch(`${a.baseUrl}/v1/stream/${path}?offset=-1`)).status).toBe(404);
    }
  });
});
