/**
 * The live feed's per-conversation projections against the old whole-capsule projection, on
 * recorded random workloads (records.ts): the feed starts anywhere in the log (mid-task, so frames
 * of tasks it never saw attributed go to every projection), receives the log in random batches,
 * projections are created at random points (seeded while batches keep arriving), and followers
 * join at the shared state or ahead of it. Each follower must receive exactly the chunks a fresh
 * projector over every record of the capsule gives after its offset, and the bytes of each slice
 * must be the encoding of its chunks. The core here is a plain in-memory log (no store involved)
 * whose readContext answers a context's records plus the unattributed ones, as the core's does.
 */
import { describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import type { FlueChunk } from '../../../adapters/flue/chunks.js';
import { encodeDataEvent } from '../../../adapters/flue/codec.js';
import { rebuild } from '../../../adapters/flue/conversation-reader.js';
import { FeedRegistry } from '../../../adapters/flue/feed-registry.js';
import type { CapsuleFeed } from '../../../adapters/flue/live-feed.js';
import { ConversationProjector } from '../../../adapters/flue/projection.js';
import { SnapshotCache } from '../../../adapters/flue/snapshot-cache.js';
import type { LogRecord } from '../../../src/log/record.js';
import { EPOCH, logCore } from './log-core.js';
import { numbered, prng, randomWorkload, status, submission, text } from './records.js';

const CONVERSATIONS = ['conv-1', 'ctx_other'];

const oracle = (
  records: LogRecord[],
  conversationId: string,
  after: number,
  through: number,
): FlueChunk[] => {
  const projector = new ConversationProjector(conversationId, EPOCH);
  const out: FlueChunk[] = [];
  for (const record of records) {
    if (record.offset > through) break;
    const chunks = projector.project(record);
    if (record.offset > after) out.push(...chunks);
  }
  return JSON.parse(JSON.stringify(out)) as FlueChunk[];
};

/** A feed over `log` from `head`, each conversation's state rebuilt from the log on first use. */
const feedOver = (log: ReturnType<typeof logCore>, head: number): CapsuleFeed => {
  const cache = new SnapshotCache();
  return new FeedRegistry({
    core: log.core,
    logger: pino({ level: 'silent' }),
    seed: (capsule, conv, epoch, through) =>
      rebuild({ core: log.core, cache }, capsule, conv, epoch, through),
    lingerMs: 60_000,
  }).openAt('cap', EPOCH, head);
};

describe('live feed projections = whole-capsule projection', () => {
  it('holds over random workloads, batches, start points and joins', async () => {
    let followersChecked = 0;
    for (let seed = 1; seed <= 150; seed++) {
      const records = randomWorkload(seed, 'conv-1');
      const rand = prng(seed * 31);
      const log = logCore(records);
      log.append(Math.floor(rand() * records.length * 0.5));
      const feed = feedOver(log, records[log.visible - 1]?.offset ?? 0);
      let delivered = log.visible;
      const followers: { conv: string; after: number; chunks: FlueChunk[] }[] = [];
      const pending: Promise<void>[] = [];
      // Bounded: every pass makes more records visible or delivers them, until all are delivered.
      while (delivered < records.length) {
        const roll = rand();
        if (roll < 0.35) log.append(1 + Math.floor(rand() * 40));
        else if (roll < 0.7) delivered = await log.deliver(delivered);
        else {
          const conv = CONVERSATIONS[Math.floor(rand() * CONVERSATIONS.length)]!;
          const projection = feed.projection(conv);
          // Join once seeded, at the shared state or ahead of it (up to what the log holds).
          pending.push(
            projection.ready.then(() => {
              const ahead = rand() < 0.4;
              const head = records[log.visible - 1]?.offset ?? 0;
              const after = ahead
                ? projection.through + Math.floor(rand() * (head - projection.through + 1))
                : projection.through;
              const entry = { conv, after, chunks: [] as FlueChunk[] };
              followers.push(entry);
              projection.follow({
                after,
                onSlice: (slice, partial) => {
                  const chunks = partial ?? slice.chunks;
                  if (!partial && chunks.length > 0)
                    expect(slice.dataAndControl.toString()).toBe(
                      encodeDataEvent(chunks) + slice.control.toString(),
                    );
                  entry.chunks.push(...chunks);
                  return true;
                },
                onEnd: () => undefined,
              });
            }),
          );
        }
        if (rand() < 0.3) await Promise.all(pending.splice(0));
      }
      await Promise.all(pending);
      delivered = await log.deliver(delivered);
      const head = records[records.length - 1]!.offset;
      for (const follower of followers) {
        expect(JSON.parse(JSON.stringify(follower.chunks))).toEqual(
          oracle(records, follower.conv, follower.after, head),
        );
        followersChecked++;
      }
      feed.end('shutdown');
    }
    expect(followersChecked).toBeGreaterThan(100);
  });

  it('a delivery of several pages visits a quiet conversation once, at its end, and only to say what changed', async () => {
    // conv-1 has one settled turn; then 250 records of another context arrive in one delivery (three
    // pages), then a delivery whose first page carries a turn of conv-1 among 150 others.
    const other = (n: number, task: string) => [
      status(task, 'ctx_other', 'working', 'inference turn 1'),
      ...Array.from({ length: n - 1 }, (_, i) => text(task, `o${i} `)),
    ];
    const turn = (sub: string) => [
      submission('conv-1', sub, `hi ${sub}`),
      status(`tsk_${sub}`, 'conv-1', 'working', 'inference turn 1'),
      text(`tsk_${sub}`, 'hello '),
      text(`tsk_${sub}`, '', true),
      status(`tsk_${sub}`, 'conv-1', 'completed', 'session ended', 'hello'),
    ];
    const first = turn('s1');
    const quiet = other(250, 'tsk_o1');
    const busy = [...other(10, 'tsk_o2'), ...turn('s2'), ...other(145, 'tsk_o3')];
    const records = numbered([...first, ...quiet, ...busy]);
    const log = logCore(records);
    log.append(first.length);
    const feed = feedOver(log, first.length);
    const projection = feed.projection('conv-1');
    await projection.ready;
    const seen: { chunks: number; upToDate: boolean; end: number }[] = [];
    projection.follow({
      after: projection.through,
      onSlice: (slice, partial) => {
        seen.push({ chunks: (partial ?? slice.chunks).length, upToDate: slice.upToDate, end: slice.end });
        return true;
      },
      onEnd: () => undefined,
    });
    // One small delivery first: the projection has told its followers it is up to date.
    let delivered = first.length;
    log.append(1);
    delivered = await log.deliver(delivered);
    expect(seen).toEqual([{ chunks: 0, upToDate: true, end: first.length + 1 }]);
    seen.length = 0;
    log.append(quiet.length - 1);
    delivered = await log.deliver(delivered);
    // Nothing for conv-1 and up to date at the end: no visit (it was three: "not up to date" twice,
    // then "up to date", a control write each).
    expect(seen).toEqual([]);
    expect(projection.through).toBe(first.length + quiet.length);
    log.append(busy.length);
    await log.deliver(delivered);
    const head = records.length;
    // Its turn in the first page (more follows: not up to date), then "up to date" at the end.
    expect(seen).toEqual([
      { chunks: expect.any(Number), upToDate: false, end: first.length + quiet.length + 100 },
      { chunks: 0, upToDate: true, end: head },
    ]);
    expect(seen[0]!.chunks).toBeGreaterThan(0);
    feed.end('shutdown');
  });

  it("a cycle visits only the conversations it concerns (and those told they were behind); the others' offset still moves", async () => {
    const turn = (conv: string, sub: string, n: number) => [
      submission(conv, sub, `hi ${sub}`),
      status(`tsk_${sub}`, conv, 'working', 'inference turn 1'),
      ...Array.from({ length: n }, (_, i) => text(`tsk_${sub}`, `t${i} `)),
    ];
    const start = [...turn('conv-1', 'a1', 2), ...turn('conv-2', 'b1', 2)];
    // Small deliveries of conv-1's records; then one of exactly a full page (its last page is full,
    // so every conversation is told it is behind); then one small delivery again.
    const more = turn('conv-1', 'a2', 110);
    const records = numbered([...start, ...more]);
    const log = logCore(records);
    log.append(start.length);
    const feed = feedOver(log, start.length);
    const one = feed.projection('conv-1');
    const two = feed.projection('conv-2');
    await Promise.all([one.ready, two.ready]);
    const told: boolean[] = [];
    two.follow({
      after: two.through,
      onSlice: (slice) => (told.push(slice.upToDate), true),
      onEnd: () => undefined,
    });
    let delivered = start.length;
    // The first delivery after joining tells both they are up to date.
    log.append(1);
    delivered = await log.deliver(delivered);
    expect(told).toEqual([true]);
    const visits = vi.spyOn(two, 'advance');
    for (let i = 0; i < 3; i++) {
      log.append(1);
      delivered = await log.deliver(delivered);
    }
    // Three cycles of conv-1's records: conv-2 was never visited, and its offset kept up.
    expect(visits).not.toHaveBeenCalled();
    expect(two.through).toBe(delivered);
    log.append(100);
    delivered = await log.deliver(delivered);
    expect(told).toEqual([true, false]);
    log.append(1);
    delivered = await log.deliver(delivered);
    expect(told).toEqual([true, false, true]);
    expect(visits).toHaveBeenCalledTimes(2);
    expect(two.through).toBe(delivered);
    feed.end('shutdown');
  });
});
