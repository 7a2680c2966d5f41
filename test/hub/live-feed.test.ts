/**
 * The live feed (src/hub/live-feed.ts, live-feeds.ts) over a real Hub and real stores: one hub
 * subscription per capsule per surface however many projectors, dispatch by context, resume after a
 * store error, the end of the feed when the log no longer continues it (a store that came back
 * older, a store reset met live) and the drop of the subscription when the last projector leaves.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import { LiveFeeds } from '../../src/hub/live-feeds.js';
import type { FeedCore, FeedEnd, FeedPolicy, FeedSink, LiveFeed } from '../../src/hub/live-feed.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogEntry, LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { storeResetFact, type LogStore } from '../../src/log/store.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { frames, WrappedStore } from './helpers.js';

const url = testRedisUrl();
const logger = pino({ level: 'silent' });

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const frame = (event: string, data: Record<string, unknown>): LogEntry => ({
  kind: 'frame',
  event,
  upstreamId: null,
  data: JSON.stringify(data),
  receivedAt: Date.now(),
});
/** A status frame names its task's context; text frames name only the task. */
const status = (task: string, ctx: string): LogEntry =>
  frame('status', { id: task, context_id: ctx, status: { state: 'working', message: 'm' }, final: false });
const text = (task: string, t: string): LogEntry => frame('text', { id: task, text: t, final: false });
const submission = (ctx: string, id: string, task?: string): LogEntry => ({
  kind: 'submission',
  protocol: 'beeos',
  owner: null,
  contextId: ctx,
  messageId: `msg_${id}`,
  text: id,
  meta: task ? { acceptedTask: task } : {},
  receivedAt: Date.now(),
});
const restart = (): LogEntry => ({
  kind: 'fact',
  fact: 'capsule-session-started',
  reason: 'restart',
  receivedAt: Date.now(),
});

/** A surface's projector of one context: the offsets it was handed. */
interface Probe {
  name: string;
  offsets: number[];
}

class ProbeSink implements FeedSink {
  readonly ends: FeedEnd[] = [];
  readonly seen: LogRecord[] = [];
  closed = false;
  constructor(private readonly feed: LiveFeed<Probe, ProbeSink>) {}
  onRecords(records: readonly LogRecord[]): void {
    this.seen.push(...records);
    this.feed.dispatch(records, (probe, record) => probe.offsets.push(record.offset));
  }
  onEnd(reason: FeedEnd): void {
    this.ends.push(reason);
  }
  onClose(): void {
    this.closed = true;
  }
}

const POLICY: FeedPolicy = {
  surface: 'test',
  storeReset: 'follow',
  // A submission naming the task it became attributes that task's frames to its context.
  link: (record) => {
    if (record.kind !== 'submission') return null;
    const task = (record.meta as { acceptedTask?: string } | undefined)?.acceptedTask;
    return task ? { taskId: task, contextId: record.contextId } : null;
  },
  // Quick resumes: the test waits on the store, not on the backoff.
  retryMs: [5, 10],
};

const rig = (store: LogStore, policy: Partial<FeedPolicy> = {}, hubOptions = {}) => {
  const hub = new Hub(store, { dissolveMs: 10, tailWaitMs: 200, ...hubOptions });
  const shutdown = new AbortController();
  cleanups.push(() => hub.close());
  const core: FeedCore = {
    subscribe: (capsule, options) => hub.subscribe(capsule, options),
    cursorStatus: (capsule, after) => hub.cursorStatus(capsule, after),
    position: (capsule) => hub.position(capsule),
    shutdownSignal: shutdown.signal,
  };
  const feeds = new LiveFeeds<Probe, ProbeSink>(
    core,
    logger,
    { ...POLICY, ...policy },
    (feed) => new ProbeSink(feed),
  );
  return { hub, feeds, shutdown };
};

const probe = (name: string): Probe => ({ name, offsets: [] });

/** A feed of a new capsule, from its head now. */
const openAtHead = async (store: LogStore, feeds: LiveFeeds<Probe, ProbeSink>) => {
  const capsule = uniqueCapsule();
  const start = await store.position(capsule);
  return { capsule, start, feed: feeds.open(capsule, start.head, start.epoch) };
};

const stores: [string, (() => LogStore) | null][] = [
  ['memory', () => new MemoryStore()],
  [
    'redis',
    url
      ? () => {
          const store = new RedisStore(url, { keyPrefix: `feed-${randomUUID().slice(0, 8)}` });
          cleanups.push(() => store.close());
          return store;
        }
      : null,
  ],
];

describe.each(stores)('live feed over the %s store', (_name, makeStore) => {
  /** A store, a hub and a feed of a new capsule from its head. */
  const fresh = async () => {
    const store = makeStore!();
    const { hub, feeds } = rig(store);
    return { store, hub, feeds, ...(await openAtHead(store, feeds)) };
  };

  it.skipIf(!makeStore)(
    'dispatches each record by its context, with one subscription per capsule',
    async () => {
      const { store, hub, feeds, capsule, start, feed } = await fresh();
      expect(feeds.open(capsule, start.head, start.epoch)).toBe(feed);
      const [a1, a2, b] = [probe('a1'), probe('a2'), probe('b')];
      feed.add(a1, 'ctx-a');
      feed.add(a2, 'ctx-a');
      feed.add(b, 'ctx-b');
      const { offsets } = await store.append(capsule, [
        submission('ctx-a', 's1'), // 0: ctx-a
        status('t1', 'ctx-a'), // 1: ctx-a, and t1 belongs to it from now on
        text('t1', 'x'), // 2: ctx-a through t1
        status('t2', 'ctx-b'), // 3: ctx-b
        text('t2', 'y'), // 4: ctx-b
        restart(), // 5: no context: every projector
        submission('ctx-b', 's2', 't3'), // 6: ctx-b, and links t3 to it (the surface's link)
        text('t3', 'z'), // 7: ctx-b through the link
        text('t9', 'w'), // 8: a task nobody attributed: every projector
      ]);
      const at = (...i: number[]): number[] => i.map((n) => offsets[n]!);
      await vi.waitFor(() => expect(feed.cursor).toBe(offsets[8]));
      expect(a1.offsets).toEqual(at(0, 1, 2, 5, 8));
      expect(a2.offsets).toEqual(at(0, 1, 2, 5, 8));
      expect(b.offsets).toEqual(at(3, 4, 5, 6, 7, 8));
      expect(feed.sink.seen.map((r) => r.offset)).toEqual(offsets);
      expect(hub.capsuleStats(capsule).subscribers).toBe(1);
      feed.close();
    },
  );

  it.skipIf(!makeStore)(
    'closes its subscription when the last projector leaves and nobody holds it',
    async () => {
      const { store, hub, feeds, capsule, start, feed } = await fresh();
      const [a, b] = [probe('a'), probe('b')];
      feed.add(a, 'ctx-a');
      feed.add(b, 'ctx-b');
      const release = feed.hold();
      await vi.waitFor(() => expect(hub.capsuleStats(capsule).subscribers).toBe(1));
      feed.remove(a);
      feed.remove(b);
      // A reader catching up to join it still holds it.
      expect(feed.closed).toBe(false);
      expect(feeds.running(capsule)).toBe(feed);
      release();
      expect(feed.closed).toBe(true);
      expect(feed.sink.closed).toBe(true);
      expect(feed.sink.ends).toEqual([]);
      expect(feeds.running(capsule)).toBeUndefined();
      await vi.waitFor(() => expect(hub.capsuleStats(capsule).subscribers).toBe(0));
      // The next reader starts a new feed, where it says.
      const { offsets } = await store.append(capsule, frames(0, 3));
      const again = feeds.open(capsule, offsets[0]!, start.epoch);
      expect(again).not.toBe(feed);
      const c = probe('c');
      again.add(c, 'ctx-c');
      await vi.waitFor(() => expect(again.sink.seen.map((r) => r.offset)).toEqual(offsets.slice(1)));
      again.close();
    },
  );
});

describe('live feed resumes and ends', () => {
  it('resumes from its cursor after a store error, losing and repeating nothing', async () => {
    const store = new WrappedStore(new MemoryStore());
    const { feeds } = rig(store);
    const capsule = uniqueCapsule();
    const start = await store.position(capsule);
    const { offsets } = await store.append(capsule, frames(0, 10));
    store.failReads = true;
    // Behind the head: its catch-up reads the store, and fail.
    const feed = feeds.open(capsule, start.head, start.epoch);
    const reads = store.reads;
    feed.add(probe('a'), 'ctx-a');
    await vi.waitFor(() => expect(feeds.counters.resumes).toBeGreaterThanOrEqual(1));
    expect(feed.sink.seen).toEqual([]);
    expect(store.reads).toBe(reads);
    store.failReads = false;
    await vi.waitFor(() => expect(feed.cursor).toBe(offsets[9]));
    const more = (await store.append(capsule, frames(10, 2))).offsets;
    await vi.waitFor(() => expect(feed.cursor).toBe(more[1]));
    expect(feed.sink.seen.map((r) => r.offset)).toEqual([...offsets, ...more]);
    expect(feed.sink.ends).toEqual([]);
    expect(feed.ended).toBeNull();
    feed.close();
  });

  it('ends "gone" when the store comes back older than its cursor (another epoch)', async () => {
    // The replacement log is created first, so its offsets (time floor) are below the current log's.
    const capsule = uniqueCapsule();
    const older = new MemoryStore();
    await older.position(capsule);
    const store = new WrappedStore(new MemoryStore(), () => older);
    const { hub, feeds } = rig(store, {}, { tailWaitMs: 20 });
    const start = await store.position(capsule);
    const feed = feeds.open(capsule, start.head, start.epoch);
    feed.add(probe('a'), 'ctx-a');
    const { offsets } = await store.append(capsule, frames(0, 5));
    await vi.waitFor(() => expect(feed.cursor).toBe(offsets[4]));
    const resets = feeds.counters.resets;
    store.loseLog();
    await store.append(capsule, frames(0, 2));
    await vi.waitFor(() => expect(feed.sink.ends).toEqual(['gone']));
    expect(feed.ended).toBe('gone');
    expect(feeds.counters.resets).toBe(resets + 1);
    expect(feed.sink.seen.map((r) => r.offset)).toEqual(offsets);
    expect(feeds.running(capsule)).toBeUndefined();
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).subscribers).toBe(0));
  });

  it('a store reset met live: followed in order, or the end of the feed, as the surface says', async () => {
    for (const storeReset of ['follow', 'end'] as const) {
      const store = new MemoryStore();
      const { feeds } = rig(store, { storeReset });
      const { capsule, start, feed } = await openAtHead(store, feeds);
      feed.add(probe('a'), 'ctx-a');
      const old = (await store.append(capsule, frames(0, 3))).offsets;
      await vi.waitFor(() => expect(feed.cursor).toBe(old[2]));
      // A writer whose floor is above the store's head: the store regressed; a new epoch starts.
      const reset = await store.append(capsule, frames(3, 2), {
        floor: old[2]! + 10,
        resetFact: storeResetFact(),
      });
      expect(reset.epoch).not.toBe(start.epoch);
      if (storeReset === 'follow') {
        await vi.waitFor(() => expect(feed.cursor).toBe(reset.offsets.at(-1)));
        expect(feed.sink.seen.map((r) => r.offset)).toEqual([...old, ...reset.offsets]);
        // Its number is learnt on the next check of the log.
        expect(feed.epoch).toBeNull();
        expect(feed.ended).toBeNull();
        feed.close();
      } else {
        await vi.waitFor(() => expect(feed.sink.ends).toEqual(['gone']));
        expect(feed.sink.seen.map((r) => r.offset)).toEqual(old);
        expect(feeds.running(capsule)).toBeUndefined();
      }
    }
  });

  it('ends every feed "shutdown" on drain', async () => {
    const store = new MemoryStore();
    const { feeds, shutdown } = rig(store);
    const [c1, c2] = [uniqueCapsule(), uniqueCapsule()];
    const ends: LiveFeed<Probe, ProbeSink>[] = [];
    for (const capsule of [c1, c2]) {
      const feed = await feeds.start(capsule);
      feed.add(probe('a'), 'ctx-a');
      ends.push(feed);
    }
    shutdown.abort();
    expect(ends.map((f) => f.sink.ends)).toEqual([['shutdown'], ['shutdown']]);
    expect(feeds.all()).toEqual([]);
  });
});
