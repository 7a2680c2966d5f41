/**
 * The store contract on Redis Streams, plus what only Redis has: epochs that fence a lost log or a
 * rolled-back counter, several writers on one capsule, the `{capsule}` hash-tag layout, dedup keys
 * with a TTL, failing fast when it is down (and saying the call was never sent).
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { notSent, type RetentionPolicy } from '../../src/log/store.js';
import { freePort } from '../support/redis-server.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { decodeRecord, encodeEntry, type LogRecord } from '../../src/log/record.js';
import { frame, readAll, runStoreContract } from './store.contract.js';

const url = testRedisUrl();
// Skip only when no Redis was started AND it is not required; under REQUIRE_REDIS=1 this fails.
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';
const redisUrl = (): string => {
  if (!url) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
  return url;
};
const makeStore = (retention?: RetentionPolicy, keyPrefix?: string): RedisStore =>
  new RedisStore(redisUrl(), { retention, keyPrefix });

runStoreContract('redis', (retention) => makeStore(retention), skip);

describe.skipIf(skip)('RedisStore', () => {
  let client: Redis;
  const stores: RedisStore[] = [];
  const open = (retention?: RetentionPolicy, keyPrefix?: string): RedisStore => {
    const store = makeStore(retention, keyPrefix);
    stores.push(store);
    return store;
  };
  beforeAll(() => {
    client = new Redis(redisUrl());
  });
  afterAll(async () => {
    await client.quit();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  const label = (r: LogRecord): string | false =>
    r.kind === 'frame'
      ? (r.upstreamId ?? '')
      : r.kind === 'fact' && `fact:${r.fact}:${'reason' in r ? r.reason : ''}`;

  it('starts a new epoch above every earlier offset when the log keys are deleted (total loss)', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const before = await store.append(cap, [frame('a'), frame('b'), frame('c')]);
    await client.del(`mg:{${cap}}:log`, `mg:{${cap}}:meta`);
    // A writer that saw `c` durable passes it as its floor: the loss is fenced, nothing appended.
    const after = await store.append(cap, [frame('new')], { floor: before.offsets[2]! });
    expect(after.reset).toBe(true);
    expect(after.epoch).not.toBe(before.epoch);
    expect(after.offsets[0]).toBeGreaterThan(before.offsets[2]!);
    expect((await store.read(cap, 0, 10)).records.map(label)).toEqual([
      'fact:frames-possibly-missing:store-reset',
    ]);
    // Without any floor (the gateway restarted too) the time floor still keeps offsets above.
    await client.del(`mg:{${cap}}:log`, `mg:{${cap}}:meta`);
    const blind = await store.append(cap, [frame('x')]);
    expect(blind.reset).toBeUndefined();
    expect(blind.offsets[0]).toBeGreaterThan(after.offsets[0]!);
  });

  it('starts a new epoch when only the meta key is lost, keeping the records that survived', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const before = await store.append(cap, [frame('a'), frame('b')]);
    await client.del(`mg:{${cap}}:meta`);
    // A reader (the hub) notices first: it mints the epoch, above the surviving records.
    const position = await store.position(cap);
    expect(position.epoch).not.toBe(before.epoch);
    expect(position.first).toBe(before.offsets[0]);
    expect(position.head).toBeGreaterThanOrEqual(before.offsets[1]!);
    // The next append still writes the store-reset fact first (even with no floor: the log had a past).
    const reset = await store.append(cap, [frame('c')]);
    expect(reset).toMatchObject({ reset: true, epoch: position.epoch });
    expect(reset.offsets[0]).toBeGreaterThan(position.head);
    const next = await store.append(cap, [frame('c')], { floor: reset.offsets[0]! });
    expect(next.offsets).toEqual([reset.offsets[0]! + 1]);
    expect((await store.read(cap, 0, 10)).records.map(label)).toEqual([
      'a',
      'b',
      'fact:frames-possibly-missing:store-reset',
      'c',
    ]);
  });

  it('fences a counter that fell below the stream (a partial rollback) with a new epoch', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const before = await store.append(cap, [frame('a'), frame('b')]);
    await client.hset(`mg:{${cap}}:meta`, 'offset', String(before.offsets[0]! - 5));
    // No floor (a writer that never saw this capsule): the stream's own last id is the witness.
    const reset = await store.append(cap, [frame('c')]);
    expect(reset.reset).toBe(true);
    expect(reset.epoch).not.toBe(before.epoch);
    expect(reset.offsets[0]).toBeGreaterThan(before.offsets[1]!);
  });

  it('fences a counter below the stream even when the entries above it are gone (XADD is the witness)', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const before = await store.append(cap, [frame('a'), frame('b'), frame('c')]);
    const { log, meta } = store.keys(cap);
    // The stream minted up to c, then lost b and c (deleted), and the counter fell back to a: the
    // stream's last entry is a again, but its last generated id is c. An id at or below c would be
    // refused by Redis; the append sees that refusal and starts a new epoch instead of failing.
    await client.xdel(log, `${before.offsets[1]}-0`, `${before.offsets[2]}-0`);
    await client.hset(meta, 'offset', String(before.offsets[0]));
    const reset = await store.append(cap, [frame('d')]);
    expect(reset.reset).toBe(true);
    expect(reset.offsets[0]).toBeGreaterThan(before.offsets[2]!);
    const after = await store.append(cap, [frame('d')]);
    expect(after.reset).toBeUndefined();
    expect(after.offsets).toEqual([reset.offsets[0]! + 1]);
    const records = await readAll(store, cap);
    expect(records.map(label)).toEqual(['a', 'fact:frames-possibly-missing:store-reset', 'd']);
    expect(await client.hget(meta, 'offset')).toBe(String(after.offsets[0]));
  });

  it('applies count retention with the append itself (XADD MAXLEN), one entry or many', async () => {
    const store = open({ maxRecords: 3, maxAgeMs: 0 });
    const cap = uniqueCapsule();
    await store.append(cap, [frame('a'), frame('b')]);
    await store.append(cap, [frame('c')]);
    await store.append(cap, [frame('d')]);
    expect((await readAll(store, cap)).map(label)).toEqual(['b', 'c', 'd']);
    await store.append(cap, [frame('e'), frame('f'), frame('g'), frame('h')]);
    expect((await readAll(store, cap)).map(label)).toEqual(['f', 'g', 'h']);
    expect(await client.xlen(store.keys(cap).log)).toBe(3);
  });

  it("keeps each writer's dedup record in its own key with a TTL, and prunes legacy meta fields", async () => {
    const store = new RedisStore(redisUrl(), { dedupTtlMs: 60_000 });
    stores.push(store);
    const cap = uniqueCapsule();
    const meta = `mg:{${cap}}:meta`;
    await store.append(cap, [frame('a')]);
    // What an older gateway left behind: one dedup field per writer (per restart) in the meta hash.
    await client.hset(meta, 'w:old-1', '3:1:1', 'w:old-2', '9:2:1');
    // Only older gateways wrote them: a store's first append on a connection looks for them (the
    // gateway restarted with this version), its later ones do not.
    await store.append(cap, [frame('a2')]);
    expect((await client.hkeys(meta)).sort()).toEqual(['epoch', 'offset', 'rid', 'w:old-1', 'w:old-2']);
    const upgraded = new RedisStore(redisUrl(), { dedupTtlMs: 60_000 });
    stores.push(upgraded);
    const done = await upgraded.append(cap, [frame('b')], { batch: { writerId: 'w1', seq: 1 } });
    expect((await client.hkeys(meta)).sort()).toEqual(['epoch', 'offset', 'rid']);
    const key = upgraded.dedupKey(cap, 'w1');
    expect(key).toBe(`mg:{${cap}}:w:w1`);
    expect(await client.get(key)).toBe(`1:${done.offsets[0]}:1`);
    const ttl = await client.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // The default TTL is a day.
    await open().append(cap, [frame('c')], { batch: { writerId: 'w2', seq: 1 } });
    expect(await client.pttl(`mg:{${cap}}:w:w2`)).toBeGreaterThan(23 * 3600_000);
  });

  it('keeps one epoch across store instances (a gateway restart on the same Redis)', async () => {
    const cap = uniqueCapsule();
    const first = await open().append(cap, [frame('a')]);
    const second = await open().append(cap, [frame('b')]);
    expect(second).toEqual({ offsets: [first.offsets[0]! + 1], epoch: first.epoch });
  });

  describe('a tail woken by XREAD', () => {
    /** read.lua calls made by `store` (its real client, counted, not replaced). */
    const countReads = (store: RedisStore): { count: number } => {
      const counter = { count: 0 };
      const client = (store as unknown as { redis: { mgRead: (...a: unknown[]) => Promise<unknown> } }).redis;
      const real = client.mgRead.bind(client);
      client.mgRead = (...args: unknown[]) => {
        counter.count++;
        return real(...args);
      };
      return counter;
    };
    /** A tail at the head (its last answer ended at `head`), then `write` while it blocks. */
    const wake = async (reader: RedisStore, cap: string, limit: number, write: () => Promise<unknown>) => {
      const head = (await reader.waitAfter(cap, 0, 1000, 1000)).position.head;
      const reads = countReads(reader);
      // Blocked or not yet sent, the XREAD names `head` explicitly: it answers with what came after.
      const woken = reader.waitAfter(cap, head, limit, 5000);
      await write();
      return { head, result: await woken, reads: reads.count };
    };

    it('takes the next page from the XREAD reply, with the head it ends at and the same epoch', async () => {
      const cap = uniqueCapsule();
      const [reader, writer] = [open(), open()];
      const { epoch } = await writer.append(cap, [frame('a')]);
      const { head, result, reads } = await wake(reader, cap, 100, () =>
        writer.append(cap, [frame('b'), frame('c')]),
      );
      expect(result.records.map(label)).toEqual(['b', 'c']);
      expect(result.records.map((r) => r.offset)).toEqual([head + 1, head + 2]);
      expect(result.position).toMatchObject({ head: head + 2, epoch });
      expect(result.position).toEqual((await reader.read(cap, head + 2, 0)).position);
      expect(reads).toBe(0);
    });

    it('reads again when the page may not reach the head (a full page)', async () => {
      const cap = uniqueCapsule();
      const [reader, writer] = [open(), open()];
      await writer.append(cap, [frame('a')]);
      const { head, result, reads } = await wake(reader, cap, 2, () =>
        writer.append(cap, [frame('b'), frame('c'), frame('d')]),
      );
      expect(result.records.map(label)).toEqual(['b', 'c']);
      expect(result.position.head).toBe(head + 3);
      expect(reads).toBe(1);
    });

    it('reads again when records under the cursor were trimmed, so the first offset is true', async () => {
      const cap = uniqueCapsule();
      const reader = open({ maxRecords: 3, maxAgeMs: 0 });
      const writer = open({ maxRecords: 3, maxAgeMs: 0 });
      await writer.append(cap, [frame('a')]);
      const { head, result, reads } = await wake(reader, cap, 100, () =>
        writer.append(cap, [frame('b'), frame('c'), frame('d'), frame('e'), frame('f')]),
      );
      expect(result.records.map(label)).toEqual(['d', 'e', 'f']);
      expect(result.position).toMatchObject({ head: head + 5, first: head + 3 });
      expect(reads).toBe(1);
    });

    it('reads again at a new epoch (the store-reset fact), reporting it', async () => {
      const cap = uniqueCapsule();
      const [reader, writer] = [open(), open()];
      const before = await writer.append(cap, [frame('a')]);
      const { result, reads } = await wake(reader, cap, 100, async () => {
        await client.del(`mg:{${cap}}:meta`);
        return writer.append(cap, [frame('b')], { floor: before.offsets[0]! });
      });
      expect(result.records.map(label)[0]).toBe('fact:frames-possibly-missing:store-reset');
      expect(result.position.epoch).not.toBe(before.epoch);
      expect(reads).toBe(1);
    });
  });

  describe("a tail reading its own process's appends", () => {
    /** Redis calls a tail makes: read.lua pages and XREAD waits (its real client, counted). */
    const countTailCalls = (store: RedisStore): { reads: number; waits: number } => {
      const counts = { reads: 0, waits: 0 };
      const inner = store as unknown as {
        redis: { mgRead: (...a: unknown[]) => Promise<unknown> };
        blockingRead: (...a: unknown[]) => Promise<unknown>;
      };
      const read = inner.redis.mgRead.bind(inner.redis);
      inner.redis.mgRead = (...args: unknown[]) => {
        counts.reads++;
        return read(...args);
      };
      const wait = inner.blockingRead.bind(store);
      inner.blockingRead = (...args: unknown[]) => {
        counts.waits++;
        return wait(...args);
      };
      return counts;
    };

    it('takes each page from its own appends, with no Redis call, in order and with the true head', async () => {
      const cap = uniqueCapsule();
      const store = open();
      await store.append(cap, [frame('a')]);
      let at = (await store.waitAfter(cap, 0, 100, 1000)).position.head;
      const calls = countTailCalls(store);
      for (const batch of [['b'], ['c', 'd'], ['e']]) {
        const woken = store.waitAfter(cap, at, 100, 5000);
        const { offsets, epoch } = await store.append(
          cap,
          batch.map((l) => frame(l)),
        );
        const page = await woken;
        expect(page.records.map(label)).toEqual(batch);
        expect(page.records.map((r) => r.offset)).toEqual(offsets);
        expect(page.position).toEqual({ ...(await open().read(cap, 0, 0)).position, epoch });
        at = page.position.head;
      }
      expect(calls).toEqual({ reads: 0, waits: 0 });
    });

    it('stays on its own appends after an XREAD served one of them ahead of its answer', async () => {
      const cap = uniqueCapsule();
      const store = open();
      await store.append(cap, [frame('a')]);
      // A cursor from a read, not from a page: the first wait goes to Redis (XREAD).
      let at = (await store.position(cap)).head;
      const calls = countTailCalls(store);
      // Which of the two replies the process handles first is up to the event loop; make it the
      // XREAD's every time: the store learns of each append a turn after Redis answered it.
      const inner = store as unknown as { own: { note: (...a: unknown[]) => void } };
      const note = inner.own.note.bind(inner.own);
      inner.own.note = (...args: unknown[]) => void setTimeout(() => note(...args), 0);
      const got: string[] = [];
      // The hub's tail loop: wait from where the last page ended, again and again (here: to 'end').
      const loop = (async () => {
        while (got[got.length - 1] !== 'end') {
          const page = await store.waitAfter(cap, at, 100, 5000);
          got.push(...page.records.map((r) => String(label(r))));
          at = page.position.head;
        }
      })();
      // A capsule writing a frame every 10 ms (the pace is the workload here, not a wait for a result).
      const labels = Array.from({ length: 30 }, (_, i) => `f${i}`);
      for (const l of labels) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        await store.append(cap, [frame(l)]);
      }
      await store.append(cap, [frame('end')]);
      await loop;
      expect(got).toEqual([...labels, 'end']);
      // The first wait, and at most a couple more if the machine stalls past the local wait:
      // before, every append after the first went through XREAD (30 waits).
      expect(calls.waits).toBeLessThanOrEqual(3);
    });

    it("reads Redis for another replica's record between its own, missing nothing", async () => {
      const cap = uniqueCapsule();
      const [store, other] = [open(), open()];
      await store.append(cap, [frame('a')]);
      let at = (await store.waitAfter(cap, 0, 100, 1000)).position.head;
      const got: string[] = [];
      const calls = countTailCalls(store);
      const steps: [RedisStore, string][] = [
        [store, 'b'],
        [other, 'x'], // another replica's submission, say: never in this process's own tail
        [store, 'c'],
        [other, 'y'],
      ];
      for (const [writer, l] of steps) {
        const woken = store.waitAfter(cap, at, 100, 5000);
        await writer.append(cap, [frame(l)]);
        const page = await woken;
        got.push(...page.records.map((r) => String(label(r))));
        at = page.position.head;
      }
      while (got.length < 4) {
        const page = await store.waitAfter(cap, at, 100, 5000);
        got.push(...page.records.map((r) => String(label(r))));
        at = page.position.head;
      }
      expect(got).toEqual(['b', 'x', 'c', 'y']);
      expect(calls.waits).toBeGreaterThan(0); // the other replica's records came through XREAD
    });
  });

  it('two writers appending concurrently to one capsule produce no duplicate and no hole', async () => {
    const cap = uniqueCapsule();
    const writers = [open(), open()];
    const b = (await writers[0]!.position(cap)).head;
    const got = await Promise.all(
      writers.flatMap((store, w) =>
        Array.from({ length: 10 }, async (_, a) => {
          const offsets: number[] = [];
          for (let i = 0; i < 100; i++) {
            offsets.push(...(await store.append(cap, [frame(`${w}:${a}:${i}`)])).offsets);
          }
          return offsets;
        }),
      ),
    );
    const all = got.flat().sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: 2000 }, (_, i) => b + i + 1));
    const records = await readAll(writers[0]!, cap);
    expect(records.map((r) => r.offset)).toEqual(all);
    expect(new Set(records.map((r) => r.kind === 'frame' && r.upstreamId)).size).toBe(2000);
  });

  it('keeps all keys of a capsule under its {capsule} hash tag, with entry ids <offset>-0', async () => {
    const cap = uniqueCapsule();
    const store = open(undefined, 'tagtest');
    const { offsets } = await store.append(cap, [frame('a'), frame('b')], {
      batch: { writerId: 'w', seq: 1 },
    });
    expect(store.keys(cap)).toEqual({ log: `tagtest:{${cap}}:log`, meta: `tagtest:{${cap}}:meta` });
    expect((await client.keys(`*${cap}*`)).sort()).toEqual([
      `tagtest:{${cap}}:log`,
      `tagtest:{${cap}}:meta`,
      `tagtest:{${cap}}:w:w`,
    ]);
    expect(await client.type(`tagtest:{${cap}}:log`)).toBe('stream');
    expect(await client.type(`tagtest:{${cap}}:meta`)).toBe('hash');
    const entries = await client.xrange(`tagtest:{${cap}}:log`, '-', '+');
    expect(entries.map(([id]) => id)).toEqual(offsets.map((o) => `${o}-0`));
    // A frame is stored in the compact form (record.ts): its data line as the capsule wrote it.
    const raw = entries[0]![1][1]!;
    const sent = frame('a', decodeRecord(raw, 0).receivedAt);
    expect(entries[0]![1]).toEqual(['r', `f\ttext\t=a\t${sent.receivedAt}\t${sent.data}`]);
    expect(entries[0]![1]).toEqual(['r', encodeEntry(sent)]);
    expect(await client.hget(`tagtest:{${cap}}:meta`, 'offset')).toBe(String(offsets[1]));
  });

  it('fails fast with store_unavailable when Redis is not there, and ping says false', async () => {
    const port = await freePort();
    const store = new RedisStore(`redis://127.0.0.1:${port}`);
    stores.push(store);
    const err = await store.append('c', [frame('a')]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('store_unavailable');
    expect(notSent(err)).toBe(true); // the writer may re-form a batch that never left
    expect((await store.read('c', 0, 1).catch((e: unknown) => e)) as GatewayError).toMatchObject({
      code: 'store_unavailable',
    });
    expect(await store.ping()).toBe(false);
  });

  it("adds one 'ready' listener for every call waiting on a connection not ready yet, not one per capsule", async () => {
    const store = open();
    const redis = (store as unknown as { redis: Redis }).redis;
    expect(redis.status).not.toBe('ready');
    const before = redis.listenerCount('ready');
    const caps = Array.from({ length: 20 }, () => uniqueCapsule());
    // Every capsule's first read at once, as a gateway's start-up does.
    const reads = Promise.all(caps.map((cap) => store.read(cap, 0, 10)));
    expect(redis.listenerCount('ready')).toBe(before + 1);
    const pages = await reads;
    expect(pages.map((p) => p.records.length)).toEqual(caps.map(() => 0));
    expect(redis.listenerCount('ready')).toBe(before);
  });
});
