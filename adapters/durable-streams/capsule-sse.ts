/**
 * `live=sse` on a capsule stream (PROTOCOL.md §5.7): after the offset, every record as JSON messages,
 * one `event: data` per batch, or per part of one within EVENT_BYTES (a JSON array, §7.1), each
 * followed by its `event: control` (`streamNextOffset`, `streamCursor`, `upToDate` once caught up).
 * A connection reads on its own up to the capsule's live feed (src/hub/live-feed.ts: one hub
 * subscription per capsule in this process, whatever the number of connections), then follows it.
 * Bytes go through the gateway's one SSE transport (heartbeats, byte bound, drain). Offsets and
 * validation are offsets.ts's; the route answers 400/404/410 before the stream opens.
 */
import type { Context } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { encodeCommentBytes, encodeSse } from '../../src/http/sse.js';
import { startSse } from '../../src/http/sse-transport.js';
import { endAfter, endOnShutdown } from '../../src/http/sse-ends.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import { FEED_RING, type FeedPolicy, type FeedSink } from '../../src/hub/live-feed.js';
import { LiveFeeds } from '../../src/hub/live-feeds.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { formatEpochOffset as formatOffset } from '../../src/http/epoch-offset.js';
import { recordText } from '../../src/http/record-json.js';
import { nextCursor } from './offsets.js';

const HEARTBEAT = encodeCommentBytes(' heartbeat');
/** Records per read while a connection catches up to the live feed. */
const READ_PAGE = 500;

/**
 * The records are a capsule's whole log (operator scope `observe`): §10.7 asks for `no-store` on
 * confidential streams, and the browser headers it recommends.
 */
const SSE_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'cross-origin-resource-policy': 'cross-origin',
};

export interface CapsuleSseRead {
  capsule: string;
  /** Deliver records with offset > after. */
  after: number;
  position: LogPosition;
  /** The `cursor` the client echoed, if any. */
  cursor: string | undefined;
  lifetimeMs: number;
}

/**
 * A data event holds records up to about this many bytes of JSON (always at least one): a hub page
 * is 500 records, and 500 records of a few kilobytes each would make one event over the per-client
 * byte bound (1 MiB), which ended the stream at once on every reconnect.
 */
const EVENT_BYTES = 256 * 1024;

interface DataEvent {
  bytes: Buffer;
  /** The offset of its last record. */
  last: number;
  records: number;
}

/** The batch as data events of at most EVENT_BYTES of records each (one record may exceed it alone). */
const eventsOf = (records: readonly LogRecord[]): DataEvent[] => {
  const events: DataEvent[] = [];
  let json = '';
  let last = 0;
  let count = 0;
  const flush = (): void => {
    const bytes = Buffer.from(encodeSse({ event: 'data', data: `[${json}]` }), 'utf8');
    events.push({ bytes, last, records: count });
    json = '';
    count = 0;
  };
  for (const record of records) {
    const text = recordText(record);
    if (json !== '' && json.length + text.length > EVENT_BYTES) flush();
    json += (json === '' ? '' : ',') + text;
    last = record.offset;
    count++;
  }
  if (json !== '') flush();
  return events;
};

/** A connection that follows the feed: it takes each batch the feed dispatches. */
interface Follower {
  onRecords(records: readonly LogRecord[]): void;
  end(): void;
}

/** The capsule streams' side of a live feed: every record to every connection that follows it. */
class CapsuleStreamFeed implements FeedSink {
  readonly followers = new Set<Follower>();

  onRecords(records: readonly LogRecord[]): void {
    for (const follower of [...this.followers]) follower.onRecords(records);
  }

  /** Drain, store lost, or the log no longer continues the feed: connections resume from their offset. */
  onEnd(): void {
    for (const follower of [...this.followers]) follower.end();
  }
}

const POLICY: FeedPolicy = {
  surface: 'durable-streams',
  // Each connection ends at a store reset past its start (the reconnect is then refused with 410).
  storeReset: 'follow',
  ring: FEED_RING,
};

export type CapsuleStreamFeeds = LiveFeeds<never, CapsuleStreamFeed>;

/** The capsule streams' live feeds of this process (one registry per route set). */
export const capsuleStreamFeeds = (deps: AdapterDeps): CapsuleStreamFeeds =>
  new LiveFeeds(deps.core, deps.logger, POLICY, () => new CapsuleStreamFeed());

export const capsuleSseResponse = (
  deps: AdapterDeps,
  feeds: CapsuleStreamFeeds,
  c: Context,
  read: CapsuleSseRead,
): Response => {
  const { core, config } = deps;
  const { capsule, position } = read;
  const headAtStart = position.head;
  let next = read.after;
  let upToDate = false;
  // Never behind the client's echo or an earlier control of this connection (§8.1).
  let cursor = nextCursor(read.cursor);
  const control = (): Buffer => {
    const fresh = nextCursor(undefined);
    if (Number(fresh) > Number(cursor)) cursor = fresh;
    const body: Record<string, unknown> = {
      streamNextOffset: formatOffset(position.epoch, next),
      streamCursor: cursor,
    };
    if (upToDate) body.upToDate = true;
    return Buffer.from(encodeSse({ event: 'control', data: JSON.stringify(body) }), 'utf8');
  };

  const { stream, response } = startSse(c, {
    headers: { ...SSE_HEADERS },
    heartbeat: { bytes: HEARTBEAT, everyMs: config.heartbeatMs },
    idle: { everyMs: config.idleControlMs, onIdle: () => stream.write(control()) },
    // Past the byte bound the stream just ends; the client resumes from its last control's offset.
    onOverflow: () => null,
  });
  endOnShutdown(core.shutdownSignal, stream);
  if (!stream.open) return response;
  endAfter(stream, read.lifetimeMs);
  // §6 `now` and any read from the tail: the first control says where the tail is, and that it is.
  if (next >= headAtStart) {
    upToDate = true;
    stream.write(control());
  }

  // Offsets are contiguous within an epoch: a jump means records were trimmed under this reader,
  // and a store reset past the start means a new epoch. Either ends the stream; the reconnect from
  // the last control's offset is then refused with 410, as a catch-up read would be.
  let contiguous = read.after > 0;
  /** The last offset taken to be written (`next` is the last written). */
  let taken = read.after;
  let lost = false;
  /** What this connection writes of a batch: past what it took, up to a jump or a store reset. */
  const take = (records: readonly LogRecord[]): readonly LogRecord[] => {
    if (lost) return [];
    // What this connection already took (the feed's position behind its own) is skipped, not a jump.
    let from = 0;
    while (from < records.length && records[from]!.offset <= taken) from++;
    let kept = records.length;
    for (let i = from; i < records.length; i++) {
      const r = records[i]!;
      if ((contiguous && r.offset !== taken + 1) || (isStoreReset(r) && r.offset > headAtStart)) {
        kept = i;
        lost = true;
        break;
      }
      contiguous = true;
      taken = r.offset;
    }
    return from === 0 && kept === records.length ? records : records.slice(from, kept);
  };
  const write = (event: DataEvent): void => {
    next = event.last;
    if (next >= headAtStart) upToDate = true;
    stream.write(event.bytes);
    stream.write(control());
  };

  const feed = feeds.open(capsule, position.head, position.epoch);
  // The connection keeps the feed: when the last one leaves, the hub subscription goes too.
  const release = feed.hold();
  stream.onClose(release);

  // Following: live records are never held back for one client (past the byte bound it is ended
  // and resumes), but a batch split into several events waits for the client to take each before
  // the next, so no batch of large records overflows by itself. Past maxQueuedRecords waiting, the
  // client is too slow: ended, it resumes from its last control's offset.
  const queue: DataEvent[] = [];
  let queued = 0;
  let waiting = false;
  const pump = (): void => {
    while (!waiting && queue.length > 0 && stream.open) {
      const event = queue.shift()!;
      queued -= event.records;
      write(event);
      if (stream.backedUp && queue.length > 0) {
        waiting = true;
        void stream.waitDrain().then(() => {
          waiting = false;
          pump();
        });
      }
    }
    if (lost && queue.length === 0) stream.end();
  };
  const follower: Follower = {
    onRecords: (records) => {
      if (!stream.open) return;
      for (const event of eventsOf(take(records))) {
        queue.push(event);
        queued += event.records;
      }
      if (queued > config.maxQueuedRecords) return stream.end();
      pump();
    },
    end: () => stream.end(),
  };

  /** Catch up with reads, paced by the client, to the feed's position; then follow the feed. */
  const catchUp = async (): Promise<void> => {
    for (;;) {
      if (!stream.open || lost) return;
      if (feed.closed) return stream.end();
      // Synchronous from here to the join: the feed cannot move in between.
      const recent = feed.recent(taken);
      if (recent) {
        feed.sink.followers.add(follower);
        stream.onClose(() => feed.sink.followers.delete(follower));
        follower.onRecords(recent);
        return;
      }
      const page = await core.read(capsule, taken, READ_PAGE);
      if (!stream.open) return;
      // Past the feed's position: the feed delivers it (or its ring does).
      const limit = feed.cursor;
      const records = page.records.filter((r) => r.offset <= limit);
      // Nothing up to the feed's position after this reader, yet the ring does not reach it: the
      // log went backwards or was trimmed under it.
      if (records.length === 0 && !feed.recent(taken)) return stream.end();
      for (const event of eventsOf(take(records))) {
        if (!stream.open) return;
        write(event);
        if (stream.backedUp) await stream.waitDrain();
      }
      if (lost) return stream.end();
    }
  };
  void catchUp().catch(() => stream.end());
  return response;
};
