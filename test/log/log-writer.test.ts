/**
 * LogWriter: order under load, Redis frozen or killed mid-burst, queue overflow recorded as a fact
 * at the right place, ambiguous failures retried without duplicates, flush and close.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { LogWriter, type Appended } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogEntry, LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { AppendResult, BatchId, LogStore } from '../../src/log/store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { frame, readAll } from './store.contract.js';

const skipRedis = testRedisUrl() === undefined && process.env.REQUIRE_REDIS !== '1';

/** A real MemoryStore behind a switch: down (every call fails) or apply-then-fail (lost reply). */
class SwitchedStore extends MemoryStore {
  down = false;
  loseNextReply = false;
  calls = 0;
  override async append(capsule: string, entries: LogEntry[], batch?: BatchId): Promise<AppendResult> {
    this.calls++;
    if (this.down) throw new GatewayError('store_unavailable', 'switched off');
    const result = await super.append(capsule, entries, batch);
    if (this.loseNextReply) {
      this.loseNextReply = false;
      throw new GatewayError('store_unavailable', 'reply lost');
    }
    return result;
  }
}

const label = (r: LogRecord): string =>
  r.kind === 'frame' ? (r.upstreamId ?? '') : r.kind === 'fact' ? `fact:${r.fact}` : `sub:${r.messageId}`;

/** Let the writer try (and fail) at least `n` times: waits on its own counter, bounded. */
const failures = async (writer: LogWriter, n: number): Promise<void> => {
  for (let i = 0; i < 2000 && writer.stats().failures < n; i++) await new Promise((r) => setTimeout(r, 5));
  expect(writer.stats().failures).toBeGreaterThanOrEqual(n);
};

const writers: LogWriter[] = [];
const newWriter = (store: LogStore, opts: ConstructorParameters<typeof LogWriter>[1] = {}): LogWriter => {
  const w = new LogWriter(store, { retryBaseMs: 5, retryMaxMs: 50, ...opts });
  writers.push(w);
  return w;
};
afterEach(async () => {
  await Promise.all(writers.splice(0).map((w) => w.close()));
});

describe('LogWriter on the memory store', () => {
  it('keeps arrival order per capsule under load, in group commits', async () => {
    const store = new MemoryStore();
    const writer = newWriter(store, { maxBatch: 100 });
    const caps = [uniqueCapsule(), uniqueCapsule(), uniqueCapsule()];
    const promises = new Map<string, Promise<Appended>[]>(caps.map((c) => [c, []]));
    for (let burst = 0; burst < 50; burst++) {
      for (let i = 0; i < 100; i++) {
        for (const c of caps) promises.get(c)!.push(writer.append(c, frame(`${burst}:${i}`)));
      }
      await new Promise((r) => setImmediate(r)); // pacing only: let some batches go out
    }
    await writer.flush();
    for (const c of caps) {
      const got = await Promise.all(promises.get(c)!);
      expect(got.map((a) => a.offset)).toEqual(Array.from({ length: 5000 }, (_, i) => i + 1));
      const records = await readAll(store, c);
      expect(records.map(label)).toEqual(
        Array.from({ length: 5000 }, (_, i) => `${Math.floor(i / 100)}:${i % 100}`),
      );
    }
    expect(writer.stats()).toMatchObject({ queued: 0, dropped: 0, failures: 0, lastError: null });
    expect(writer.stats().batches).toBeLessThan(15_000); // grouped, not one call per entry
  });

  it('splits batches by size so one huge artifact does not make a huge store call', async () => {
    const store = new MemoryStore();
    const writer = newWriter(store, { maxBatchBytes: 2500 });
    const cap = uniqueCapsule();
    const big = (l: string) => ({ ...frame(l), data: 'x'.repeat(1000) });
    const got = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((l) => writer.append(cap, big(l))));
    expect(got.map((a) => a.offset)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(writer.stats().batches).toBe(3); // two ~1.1 kB entries per 2.5 kB batch
    expect((await readAll(store, cap)).map(label)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('retries while the store is down and flushes everything in order when it returns', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    const first = writer.append(cap, frame('1'));
    await first;
    store.down = true;
    const pending = ['2', '3', '4'].map((l) => writer.append(cap, frame(l)));
    await failures(writer, 2);
    expect(writer.capsuleStats(cap)).toMatchObject({ queued: 3, lastError: 'switched off' });
    store.down = false;
    expect((await Promise.all(pending)).map((a) => a.offset)).toEqual([2, 3, 4]);
    await writer.flush();
    expect((await readAll(store, cap)).map(label)).toEqual(['1', '2', '3', '4']);
    expect(writer.capsuleStats(cap)).toMatchObject({ queued: 0, lastError: null });
  });

  it('applies a batch once when the reply is lost and still resolves its offsets', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    await writer.append(cap, frame('0'));
    store.loseNextReply = true;
    const got = await Promise.all(['a', 'b', 'c'].map((l) => writer.append(cap, frame(l))));
    expect(got.map((a) => a.offset)).toEqual([2, 3, 4]);
    expect(writer.stats().failures).toBe(1);
    expect((await readAll(store, cap)).map(label)).toEqual(['0', 'a', 'b', 'c']);
  });

  it('records dropped frames as a store-unavailable fact exactly where the drop began', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store, { maxQueuedEntries: 4 });
    const cap = uniqueCapsule();
    store.down = true;
    const kept = ['f1', 'f2', 'f3', 'f4'].map((l) => writer.append(cap, frame(l)));
    const dropped = ['f5', 'f6', 'f7'].map((l) => writer.append(cap, frame(l, 1234)));
    const refused = writer.append(cap, {
      kind: 'submission',
      protocol: 'murmur',
      owner: null,
      contextId: 'ctx',
      messageId: 'm1',
      text: 'hi',
      receivedAt: 1,
    });
    // A fact is never dropped; it also closes the run of drops before it.
    const fact = writer.append(cap, { kind: 'fact', fact: 'upstream-lost', reason: 'eof', receivedAt: 2 });
    const later = ['f8', 'f9'].map((l) => writer.append(cap, frame(l, 5678)));
    for (const p of [...dropped, ...later]) {
      await expect(p).rejects.toMatchObject({ code: 'store_unavailable', details: { dropped: true } });
    }
    await expect(refused).rejects.toThrow(GatewayError);
    await expect(refused).rejects.toMatchObject({
      code: 'store_unavailable',
      message: 'log store unavailable: submission not recorded',
    });
    expect(writer.capsuleStats(cap)).toMatchObject({ dropped: 5 });
    store.down = false;
    await Promise.all([...kept, fact]);
    await writer.flush();
    await writer.append(cap, frame('f10'));
    const records = await readAll(store, cap);
    expect(records.map(label)).toEqual([
      'f1',
      'f2',
      'f3',
      'f4',
      'fact:frames-possibly-missing',
      'fact:upstream-lost',
      'fact:frames-possibly-missing',
      'f10',
    ]);
    expect(records[4]).toEqual({
      kind: 'fact',
      fact: 'frames-possibly-missing',
      reason: 'store-unavailable',
      count: 3,
      receivedAt: 1234,
      offset: 5,
    });
    expect(records[6]).toMatchObject({ reason: 'store-unavailable', count: 2, receivedAt: 5678, offset: 7 });
  });

  it('write() (no promise, the ingestion path) keeps order and records its drops the same way', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store, { maxQueuedEntries: 3 });
    const cap = uniqueCapsule();
    store.down = true;
    for (const l of ['w1', 'w2', 'w3']) writer.write(cap, frame(l));
    for (const l of ['w4', 'w5']) writer.write(cap, frame(l, 4321)); // dropped: the queue is full
    writer.write(cap, { kind: 'fact', fact: 'upstream-lost', reason: 'eof', receivedAt: 9 }); // never dropped
    expect(writer.capsuleStats(cap)).toMatchObject({ dropped: 2 });
    store.down = false;
    await writer.flush();
    writer.write(cap, frame('w6'));
    await writer.flush();
    const records = await readAll(store, cap);
    expect(records.map(label)).toEqual([
      'w1',
      'w2',
      'w3',
      'fact:frames-possibly-missing',
      'fact:upstream-lost',
      'w6',
    ]);
    expect(records[3]).toMatchObject({ reason: 'store-unavailable', count: 2, receivedAt: 4321 });
  });

  it('flush waits for durability; close rejects what is left and refuses new entries', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    store.down = true;
    const pending = writer.append(cap, frame('a'));
    let flushed = false;
    const flush = writer.flush().then(() => (flushed = true));
    await failures(writer, 2);
    expect(flushed).toBe(false);
    store.down = false;
    await flush;
    expect(await pending).toMatchObject({ offset: 1 });
    store.down = true;
    const stuck = writer.append(cap, frame('b'));
    await failures(writer, 4);
    await writer.close();
    await expect(stuck).rejects.toMatchObject({ code: 'shutting_down', message: 'log writer closed' });
    await expect(writer.append(cap, frame('c'))).rejects.toMatchObject({ code: 'shutting_down' });
    await writer.flush(); // resolves at once once closed
  });
});

describe.skipIf(skipRedis)('LogWriter on Redis through an outage', () => {
  let server: RedisServer;
  let store: RedisStore;
  beforeAll(async () => {
    server = await startRedisServer(); // its own port: this file freezes and kills it
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
  });
  let verify: RedisStore | null = null;
  /** A second store for checking the log, with the default (patient) command timeout. */
  const reader = (): RedisStore => (verify ??= new RedisStore(server.url));
  afterEach(async () => {
    await store?.close();
    await verify?.close();
    verify = null;
  });

  /** Append `count` frames labelled `${prefix}${i}` in paced bursts; returns their promises. */
  const burst = async (
    w: LogWriter,
    cap: string,
    prefix: string,
    count: number,
  ): Promise<Promise<Appended>[]> => {
    const out: Promise<Appended>[] = [];
    for (let i = 0; i < count; i++) {
      out.push(w.append(cap, frame(`${prefix}${i}`)));
      if (i % 200 === 199) await new Promise((r) => setTimeout(r, 1)); // pacing only
    }
    return out;
  };

  it('loses nothing and duplicates nothing when Redis freezes for seconds mid-burst', async () => {
    store = new RedisStore(server.url, { commandTimeoutMs: 1000 });
    const writer = newWriter(store, { retryBaseMs: 20, retryMaxMs: 200 });
    const cap = uniqueCapsule();
    const before = await burst(writer, cap, 'a', 5000);
    server.pause();
    const during = await burst(writer, cap, 'b', 5000);
    await failures(writer, 2);
    await new Promise((r) => setTimeout(r, 1000)); // pacing only: keep the outage going a while
    server.resume();
    const afterwards = await burst(writer, cap, 'c', 5000);
    const got = await Promise.all([...before, ...during, ...afterwards]);
    const epoch = got[0]!.epoch;
    expect(got.every((a) => a.epoch === epoch)).toBe(true);
    expect(got.map((a) => a.offset)).toEqual(Array.from({ length: 15_000 }, (_, i) => i + 1));
    const records = await readAll(reader(), cap, 1000);
    const expected = ['a', 'b', 'c'].flatMap((p) => Array.from({ length: 5000 }, (_, i) => `${p}${i}`));
    expect(records.map(label)).toEqual(expected);
    expect(writer.stats()).toMatchObject({ queued: 0, dropped: 0, lastError: null });
  });

  it('keeps everything appended after Redis is killed; the restarted Redis has a new epoch', async () => {
    store = new RedisStore(server.url, { commandTimeoutMs: 1000 });
    const writer = newWriter(store, { retryBaseMs: 20, retryMaxMs: 200 });
    const cap = uniqueCapsule();
    const old = await Promise.all(await burst(writer, cap, 'old', 1000));
    await server.stop('SIGKILL');
    const during = await burst(writer, cap, 'down', 2000);
    await failures(writer, 2);
    await server.start();
    const afterwards = await burst(writer, cap, 'up', 2000);
    const got = await Promise.all([...during, ...afterwards]);
    expect(got.every((a) => a.epoch === got[0]!.epoch)).toBe(true);
    expect(got[0]!.epoch).not.toBe(old[0]!.epoch);
    expect(got.map((a) => a.offset)).toEqual(Array.from({ length: 4000 }, (_, i) => i + 1));
    const records = await readAll(reader(), cap, 1000);
    const expected = [
      ...Array.from({ length: 2000 }, (_, i) => `down${i}`),
      ...Array.from({ length: 2000 }, (_, i) => `up${i}`),
    ];
    expect(records.map(label)).toEqual(expected);
    expect((await reader().position(cap)).epoch).toBe(got[0]!.epoch);
  });
});
