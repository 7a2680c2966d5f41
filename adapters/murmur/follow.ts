/**
 * A capsule's log as `GET /v1/follow` holds it (`murmur:{capsule}`): the records the long-poll
 * returns, each as it shows them, the cursor being the poll's `after` (an offset). A retention or
 * "ahead" gap is an event of its own (`gap`, the poll's gap object) before the stream goes on from
 * what the log still holds; frames-possibly-missing facts are records like any other.
 *
 * Live, a reader at the head is pushed each batch from ONE hub subscription per capsule per process
 * (a live feed, src/hub/live-feed.ts), however many connections follow the capsule, and every
 * record's event (and its JSON) is made once per process: a batch costs each reader a loop over
 * shared events, not a wait, a read and a serialisation of its own. Whatever is not plainly the
 * next batch after the reader's cursor (a reader behind the feed and out of its ring, a store reset,
 * a feed that ended) goes back to reads, which tell gaps and resets as before.
 */
import { may, seesCapsule, type Principal } from '../../src/auth/principal.js';
import type { Logger } from 'pino';
import type { GatewayCore } from '../../src/core/types.js';
import type { FollowEvent, FollowLiveSink, FollowOpen, FollowSource } from '../../src/http/surface.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { recordJson, recordText } from '../../src/http/record-json.js';
import { LiveFeeds } from '../../src/hub/live-feeds.js';
import type { FeedSink, LiveFeed } from '../../src/hub/live-feed.js';
import { pollGap } from './poll-json.js';

const OFFSET = /^(0|[1-9][0-9]{0,15})$/;
/** Recent records a capsule's feed keeps, so a reader that catches up just behind it joins at once. */
const RING = 1024;

const events = new WeakMap<LogRecord, FollowEvent>();

/** A record's event, made once per record object: every reader of the capsule shares it. */
const recordEvent = (record: LogRecord): FollowEvent => {
  let ev = events.get(record);
  if (!ev) {
    const json = recordText(record);
    ev = { event: 'record', data: recordJson(record), cursor: String(record.offset), json };
    events.set(record, ev);
  }
  return ev;
};

/** One reader on a capsule's feed: its cursor, and where its events go. */
interface LiveReader {
  after: number;
  sink: FollowLiveSink;
}

/** A capsule's feed hands every batch to every reader at the head. */
class FollowFeedSink implements FeedSink {
  constructor(private readonly feed: LiveFeed<LiveReader, FollowFeedSink>) {}

  onRecords(records: readonly LogRecord[], before: number): void {
    let shared: FollowEvent[] | null = null;
    // No copy of a thousand readers per batch: a Map's iteration skips a reader removed meanwhile (a
    // connection cut by its byte bound while written to), and none is added synchronously.
    for (const reader of this.feed.targets) {
      if (reader.after < before) {
        // Not the next batch for this reader: it reads again from its cursor.
        this.feed.remove(reader);
        reader.sink.lost();
        continue;
      }
      let evs: FollowEvent[];
      if (reader.after === before) evs = shared ??= records.map(recordEvent);
      else evs = records.filter((r) => r.offset > reader.after).map(recordEvent);
      reader.after = records[records.length - 1]!.offset;
      if (evs.length > 0) reader.sink.events(evs, String(reader.after));
    }
  }

  onEnd(): void {
    // A drain, or the log no longer continues the feed: every reader goes back to reads.
    for (const reader of [...this.feed.targets]) reader.sink.lost();
  }
}

const page = async (
  core: GatewayCore,
  capsule: string,
  after: number,
  limit: number,
  waitMs: number,
  signal: AbortSignal,
): Promise<{ records: readonly LogRecord[]; position: LogPosition }> => {
  const { status, position } = await core.cursorStatus(capsule, after);
  // Never wait on a cursor the log has not reached: its gap is the answer.
  if (status === 'ahead') return { records: [], position };
  if (status === 'gone' || waitMs === 0) return core.read(capsule, after, limit);
  return core.waitAfter(capsule, after, limit, waitMs, signal);
};

export const murmurFollow = (core: GatewayCore, logger: Logger): FollowSource => {
  const feeds = new LiveFeeds<LiveReader, FollowFeedSink>(
    core,
    logger,
    // A store reset ends the feed: reads tell it as they always have.
    { surface: 'follow', storeReset: 'end', ring: RING },
    (feed) => new FollowFeedSink(feed),
  );
  return {
    scheme: 'murmur',
    open: (principal, capsule, cursor) => open(core, feeds, principal, capsule, cursor),
  };
};

const open = async (
  core: GatewayCore,
  feeds: LiveFeeds<LiveReader, FollowFeedSink>,
  principal: Principal,
  capsule: string,
  cursor: string,
): Promise<FollowOpen> => {
  // Capsule-wide: every owner's records, so the operator scope, as on /murmur/{c}/poll.
  if (!core.hasCapsule(capsule) || !seesCapsule(principal, capsule) || !may(principal, 'observe', capsule))
    return { ok: false, status: 404, message: 'no such stream' };
  let start: number;
  if (cursor === '-1') start = 0;
  else if (cursor === 'now') start = (await core.position(capsule)).head;
  else if (OFFSET.test(cursor)) start = Number(cursor);
  else return { ok: false, status: 400, message: 'the cursor must be -1, now or an offset' };
  /** The log's epoch as the last read saw it: a feed started for this reader follows it. */
  let epoch: number | null = null;
  return {
    ok: true,
    cursor: String(start),
    target: {
      live: (at, sink) => {
        const after = Number(at);
        const running = feeds.running(capsule);
        if (!running && epoch === null) return null;
        const feed = running ?? feeds.open(capsule, after, epoch!);
        if (feed.closed || feed.ended) return null;
        const reader: LiveReader = { after, sink };
        if (feed.cursor > after) {
          // The feed is ahead: the records between come from its ring, or the reader reads them.
          const recent = feed.recent(after);
          if (!recent || recent.length === 0) return null;
          reader.after = recent[recent.length - 1]!.offset;
          feed.add(reader, '');
          sink.events(recent.map(recordEvent), String(reader.after));
        } else feed.add(reader, '');
        return { close: () => feed.remove(reader) };
      },
      read: async (at, limit, waitMs, signal) => {
        const after = Number(at);
        const { records, position } = await page(core, capsule, after, limit, waitMs, signal);
        epoch = position.epoch;
        const events: FollowEvent[] = [];
        const gap = pollGap(after, records, position);
        let next = after;
        if (gap && gap.reason !== 'possibly_missing') {
          next = records.length > 0 ? after : gap.first_available - 1;
          events.push({ event: 'gap', data: gap, cursor: String(next) });
        }
        for (const r of records) events.push(recordEvent(r));
        const last = records[records.length - 1];
        return { events, cursor: String(last ? last.offset : next) };
      },
    },
  };
};
