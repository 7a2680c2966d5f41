/**
 * LogWriter: order under load, Redis frozen, killed or rolled back to an older snapshot mid-burst,
 * a queue bounded in bytes whose overflow (facts included) is recorded as one fact at the right
 * place, withdrawal before send, ambiguous failures retried without duplicates, idle capsules
 * trimmed by age, flush and close.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { LogWriter, type Appended } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogEntry, LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { AppendOptions, AppendResult, LogStore } from '../../src/log/store.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { frame, readAll } from './store.contract.js';

const skipRedis = testRedisUrl() === undefined && process.env.REQUIRE_REDIS !== '1';

/**
 * A real MemoryStore behind a switch: down (every call fails; `notSent` says it never reached the
 * store, as RedisStore does while disconnected) or apply-then-fail (lost reply).
 */
class SwitchedStore extends MemoryStore {
  down = false;
  notSent = false;
  loseNextReply = false;
  calls = 0;
  /** Called with each attempt's entries before it is answered. */
  onCall: ((entries: LogEntry[]) => void) | null = null;
  override async append(
    capsule: string,
    entries: LogEntry[],
    options?: AppendOptions,
  ): Promise<AppendResult> {
    this.calls++;
    this.onCall?.(entries);
    if (this.down) {
      throw new GatewayError(
        'store_unavailable',
        'switched off',
        this.notSent ? { notSent: true } : undefined,
      );
    }
    const result = await super.append(capsule, entries, options);
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
    const bases = new Map(
      await Promise.all(caps.map(async (c) => [c, (await store.position(c)).head] as const)),
    );
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
      expect(got.map((a) => a.offset)).toEqual(Array.from({ length: 5000 }, (_, i) => bases.get(c)! + i + 1));
      const records = await readAll(store, c);
      expect(records.map(label)).toEqual(
        Array.from({ length: 5000 }, (_, i) => `${Math.floor(i / 100)}:${i % 100}`),
      );
    }
    expect(writer.stats()).toMatchObject({
      queued: 0,
      queuedBytes: 0,
      dropped: 0,
      failures: 0,
      lastError: null,
    });
    expect(writer.stats().batches).toBeLessThan(15_000); // grouped, not one call per entry
  });

  it('splits batches by size so one huge artifact does not make a huge store call', async () => {
    const store = new MemoryStore();
    const writer = newWriter(store, { maxBatchBytes: 2500 });
    const cap = uniqueCapsule();
    const big = (l: string) => ({ ...frame(l), data: 'x'.repeat(1000) });
    const got = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((l) => writer.append(cap, big(l))));
    const b = got[0]!.offset - 1;
    expect(got.map((a) => a.offset)).toEqual([1, 2, 3, 4, 5, 6].map((i) => b + i));
    expect(writer.stats().batches).toBe(3); // two ~1.1 kB entries per 2.5 kB batch
    expect((await readAll(store, cap)).map(label)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('retries while the store is down and flushes everything in order when it returns', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    const { offset: b } = await writer.append(cap, frame('1'));
    store.down = true;
    const pending = ['2', '3', '4'].map((l) => writer.append(cap, frame(l)));
    await failures(writer, 2);
    expect(writer.capsuleStats(cap)).toMatchObject({ queued: 3, lastError: 'switched off' });
    store.down = false;
    expect((await Promise.all(pending)).map((a) => a.offset)).toEqual([b + 1, b + 2, b + 3]);
    await writer.flush();
    expect((await readAll(store, cap)).map(label)).toEqual(['1', '2', '3', '4']);
    expect(writer.capsuleStats(cap)).toMatchObject({ queued: 0, lastError: null });
  });

  it('applies a batch once when the reply is lost and still resolves its offsets', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    const { offset: b } = await writer.append(cap, frame('0'));
    store.loseNextReply = true;
    const got = await Promise.all(['a', 'b', 'c'].map((l) => writer.append(cap, frame(l))));
    expect(got.map((a) => a.offset)).toEqual([b + 1, b + 2, b + 3]);
    expect(writer.stats().failures).toBe(1);
    expect((await readAll(store, cap)).map(label)).toEqual(['0', 'a', 'b', 'c']);
  });

  const submission = (messageId: string): LogEntry => ({
    kind: 'submission',
    protocol: 'murmur',
    owner: null,
    contextId: 'ctx',
    messageId,
    text: 'hi',
    receivedAt: 1,
  });
  const lost = (receivedAt: number): LogEntry => ({
    kind: 'fact',
    fact: 'upstream-lost',
    reason: 'eof',
    receivedAt,
  });
  /** A frame of about 1 kB in the writer's accounting. */
  const kb = (l: string, receivedAt = Date.now()): LogEntry => ({
    ...frame(l, receivedAt),
    data: 'x'.repeat(904),
  });

  it('bounds the queue in bytes, facts included: one counted fact where the drops began', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store, { maxPendingBytes: 4096 });
    const cap = uniqueCapsule();
    store.down = true;
    const kept = ['f1', 'f2', 'f3', 'f4'].map((l) => writer.append(cap, kb(l)));
    const dropped = ['f5', 'f6', 'f7'].map((l) => writer.append(cap, kb(l, 1234)));
    const refused = writer.append(cap, submission('m1'));
    // Past the bound a fact is dropped too (a fact can be large; the bound is what protects memory).
    const fact = writer.append(cap, lost(2));
    expect(writer.write(cap, lost(3))).toBe(false);
    expect(writer.write(cap, kb('f8', 5678))).toBe(false);
    for (const p of [...dropped, fact]) {
      await expect(p).rejects.toMatchObject({ code: 'store_unavailable', details: { dropped: true } });
    }
    await expect(refused).rejects.toThrow(GatewayError);
    await expect(refused).rejects.toMatchObject({
      code: 'store_unavailable',
      message: 'log store unavailable: submission not recorded',
    });
    expect(writer.capsuleStats(cap)).toMatchObject({ dropped: 6, queued: 5 });
    let roomy = false;
    const room = writer.whenRoom(cap).then(() => (roomy = true));
    await failures(writer, 1);
    expect(roomy).toBe(false);
    store.down = false;
    await room;
    await Promise.all(kept);
    expect(writer.write(cap, kb('f9'))).toBe(true);
    await writer.flush();
    const records = await readAll(store, cap);
    expect(records.map(label)).toEqual(['f1', 'f2', 'f3', 'f4', 'fact:frames-possibly-missing', 'f9']);
    // One marker for the whole run: frames counted, placed where the run began.
    expect(records[4]).toMatchObject({ reason: 'store-unavailable', count: 4, receivedAt: 1234 });
  });

  it('keeps refusing after an overflow until the queue is below its low-water mark', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store, { maxPendingEntries: 4 });
    const cap = uniqueCapsule();
    store.down = true;
    for (const l of ['w1', 'w2', 'w3', 'w4']) expect(writer.write(cap, frame(l))).toBe(true);
    expect(writer.write(cap, frame('w5', 4321))).toBe(false);
    store.down = false;
    await writer.whenRoom(cap);
    await writer.flush();
    expect(writer.write(cap, frame('w6'))).toBe(true);
    await writer.flush();
    const records = await readAll(store, cap);
    expect(records.map(label)).toEqual(['w1', 'w2', 'w3', 'w4', 'fact:frames-possibly-missing', 'w6']);
    expect(records[4]).toMatchObject({ reason: 'store-unavailable', count: 1, receivedAt: 4321 });
  });

  it('withdraws an entry whose signal aborts before its batch was sent, never after', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    // Not connected: every attempt certainly never reached the store.
    store.down = true;
    store.notSent = true;
    const ac = new AbortController();
    const before = writer.append(cap, frame('kept-1'));
    const withdrawn = writer.append(cap, submission('m-withdrawn'), { signal: ac.signal });
    const after = writer.append(cap, frame('kept-2'));
    await failures(writer, 2);
    ac.abort();
    await expect(withdrawn).rejects.toMatchObject({
      code: 'store_unavailable',
      details: { withdrawn: true },
    });
    store.down = false;
    await Promise.all([before, after]);
    expect((await readAll(store, cap)).map(label)).toEqual(['kept-1', 'kept-2']);
    // Sent, reply lost (ambiguous): the abort comes too late, the entry settles by the store's answer.
    const late = new AbortController();
    store.loseNextReply = true;
    store.onCall = () => {
      store.onCall = null;
      late.abort();
    };
    const sent = writer.append(cap, submission('m-sent'), { signal: late.signal });
    expect((await sent).offset).toBeGreaterThan(0);
    expect((await readAll(store, cap)).map(label)).toEqual(['kept-1', 'kept-2', 'sub:m-sent']);
    // Already aborted: refused at once.
    await expect(writer.append(cap, frame('x'), { signal: late.signal })).rejects.toMatchObject({
      details: { withdrawn: true },
    });
  });

  it('retries a batch that may have been sent as is, even when its entries are withdrawn meanwhile', async () => {
    const store = new SwitchedStore();
    const writer = newWriter(store);
    const cap = uniqueCapsule();
    store.down = true; // ambiguous failures: the script may have run
    const ac = new AbortController();
    const sub = writer.append(cap, submission('m1'), { signal: ac.signal });
    await failures(writer, 1);
    ac.abort();
    store.down = false;
    expect((await sub).offset).toBeGreaterThan(0);
    expect((await readAll(store, cap)).map(label)).toEqual(['sub:m1']);
  });

  it('trims an idle capsule by age on its timer, without any append', async () => {
    const store = new MemoryStore({ maxRecords: 0, maxAgeMs: 60_000 });
    const cap = uniqueCapsule();
    const { offsets } = await store.append(cap, [frame('old', Date.now() - 120_000), frame('young')]);
    const writer = newWriter(store, { trimIntervalMs: 10 });
    writer.track(cap);
    // Waits on the store's own state, bounded: the sweep runs on a timer.
    for (let i = 0; i < 2000 && (await store.position(cap)).first <= offsets[0]!; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await readAll(store, cap)).map(label)).toEqual(['young']);
    expect(writer.stats().batches).toBe(0);
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
    expect((await pending).offset).toBe((await store.position(cap)).head);
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
    server.dropSnapshot(); // the next test's restart starts empty
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
    expect(got.map((a) => a.offset)).toEqual(Array.from({ length: 15_000 }, (_, i) => got[0]!.offset + i));
    const records = await readAll(reader(), cap, 1000);
    const expected = ['a', 'b', 'c'].flatMap((p) => Array.from({ length: 5000 }, (_, i) => `${p}${i}`));
    expect(records.map(label)).toEqual(expected);
    expect(writer.stats()).toMatchObject({ queued: 0, dropped: 0, lastError: null });
  });

  /** Every offset the writer reported durable, with its label: what readers may have seen. */
  const handOut = (into: Map<number, string>, prefix: string, got: Appended[]): Appended[] => {
    got.forEach((a, i) => into.set(a.offset, `${prefix}${i}`));
    return got;
  };
  const labelsOf = (prefix: string, n: number): string[] =>
    Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  const resetOnce = (writer: LogWriter, seen: string[]): Promise<void> =>
    new Promise((resolve) =>
      writer.onReset((capsule) => {
        seen.push(capsule);
        resolve();
      }),
    );

  it('fences a Redis restarted from an older snapshot: a new epoch above every offset handed out', async () => {
    store = new RedisStore(server.url, { commandTimeoutMs: 1000 });
    const writer = newWriter(store, { retryBaseMs: 20, retryMaxMs: 200 });
    const cap = uniqueCapsule();
    const handedOut = new Map<number, string>();
    const a = handOut(handedOut, 'a', await Promise.all(await burst(writer, cap, 'a', 500)));
    await server.snapshot();
    // Durable, so readers may have seen them; the rollback loses them.
    handOut(handedOut, 'b', await Promise.all(await burst(writer, cap, 'b', 500)));
    const resets: string[] = [];
    writer.onReset((capsule) => resets.push(capsule));
    await server.stop('SIGKILL');
    const during = await burst(writer, cap, 'c', 300); // the writer keeps appending through it
    await failures(writer, 2);
    await server.start(); // from the snapshot: only a0..a499, the counter back at a499
    const settled = await Promise.allSettled(during);
    const d = handOut(new Map(), 'd', await Promise.all(await burst(writer, cap, 'd', 300)));
    const records = await readAll(reader(), cap, 1000);
    // Never an offset re-used with other content (the old script handed b's offsets to c and d).
    for (const r of records) {
      const was = handedOut.get(r.offset);
      if (was !== undefined) expect(label(r)).toBe(was);
    }
    const maxHandedOut = Math.max(...handedOut.keys());
    expect(d[0]!.epoch).not.toBe(a[0]!.epoch);
    expect(d[0]!.offset).toBeGreaterThan(maxHandedOut + 1);
    // What survived stays; the new epoch's first record is the store-reset fact, then new appends.
    expect(records.map(label)).toEqual([
      ...labelsOf('a', 500),
      'fact:frames-possibly-missing',
      ...labelsOf('d', 300),
    ]);
    expect(records[500]).toMatchObject({ kind: 'fact', reason: 'store-reset' });
    expect(records[500]!.offset).toBeGreaterThan(maxHandedOut);
    expect(resets).toEqual([cap]);
    // Frames queued when the reset was found came after the lost records: discarded and counted.
    for (const s of settled) {
      expect(s).toMatchObject({ status: 'rejected', reason: { details: { discarded: true } } });
    }
    expect(writer.capsuleStats(cap)).toMatchObject({ discarded: 300, queued: 0 });
    expect((await reader().position(cap)).epoch).toBe(d[0]!.epoch);
  });

  it('fences a rollback even when the gateway restarted too (a new writer knows no floor)', async () => {
    store = new RedisStore(server.url, { commandTimeoutMs: 1000 });
    const before = newWriter(store);
    const cap = uniqueCapsule();
    const handedOut = new Map<number, string>();
    handOut(handedOut, 'a', await Promise.all(await burst(before, cap, 'a', 200)));
    await server.snapshot();
    handOut(handedOut, 'b', await Promise.all(await burst(before, cap, 'b', 200)));
    await before.close();
    // A whole-host restart: Redis back from its snapshot, a new gateway process whose writer has
    // never appended to this capsule. Only Redis's own run id says it restarted meanwhile.
    await server.stop('SIGKILL');
    await server.start();
    const after = newWriter(store, { retryBaseMs: 20, retryMaxMs: 200 });
    const resets: string[] = [];
    after.onReset((capsule) => resets.push(capsule));
    // The first batch finds the fence: discarded (the ingestor re-requests such frames by a replay).
    const first = await Promise.allSettled(await burst(after, cap, 'c', 100));
    expect(first.every((x) => x.status === 'rejected')).toBe(true);
    expect(resets).toEqual([cap]);
    const d = handOut(new Map(), 'd', await Promise.all(await burst(after, cap, 'd', 100)));
    const records = await readAll(reader(), cap, 1000);
    for (const r of records) {
      const was = handedOut.get(r.offset);
      if (was !== undefined) expect(label(r)).toBe(was);
    }
    expect(records.map(label)).toEqual([
      ...labelsOf('a', 200),
      'fact:frames-possibly-missing',
      ...labelsOf('d', 100),
    ]);
    expect(records[200]).toMatchObject({ kind: 'fact', reason: 'store-reset' });
    expect(d[0]!.offset).toBeGreaterThan(Math.max(...handedOut.keys()));
  });

  it('a gateway restart alone (Redis kept running) starts no new epoch', async () => {
    store = new RedisStore(server.url, { commandTimeoutMs: 1000 });
    const before = newWriter(store);
    const cap = uniqueCapsule();
    const a = await Promise.all(await burst(before, cap, 'a', 50));
    await before.close();
    const after = newWriter(store);
    const b = await Promise.all(await burst(after, cap, 'b', 50));
    expect(b[0]!.epoch).toBe(a[0]!.epoch);
    expect(b[0]!.offset).toBe(a[49]!.offset + 1);
  });

  it('fences a Redis that lost everything: the reset fact first, offsets above the old ones', async () => {
    store = new RedisStore(server.url, { commandTimeoutMs: 1000 });
    const writer = newWriter(store, { retryBaseMs: 20, retryMaxMs: 200 });
    const cap = uniqueCapsule();
    const old = await Promise.all(await burst(writer, cap, 'old', 1000));
    const resets: string[] = [];
    const reset = resetOnce(writer, resets);
    await server.stop('SIGKILL');
    const during = await burst(writer, cap, 'down', 2000);
    await failures(writer, 2);
    await server.start(); // empty
    await reset;
    const up = await Promise.all(await burst(writer, cap, 'up', 2000));
    expect((await Promise.allSettled(during)).every((s) => s.status === 'rejected')).toBe(true);
    expect(writer.capsuleStats(cap)).toMatchObject({ discarded: 2000 });
    expect(up.every((x) => x.epoch === up[0]!.epoch)).toBe(true);
    expect(up[0]!.epoch).not.toBe(old[0]!.epoch);
    const records = await readAll(reader(), cap, 1000);
    expect(records.map(label)).toEqual(['fact:frames-possibly-missing', ...labelsOf('up', 2000)]);
    expect(records[0]!.offset).toBeGreaterThan(old[999]!.offset);
    expect(records.map((r) => r.offset)).toEqual(records.map((_, i) => records[0]!.offset + i));
  });
});
