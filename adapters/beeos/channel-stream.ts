/**
 * `GET …/{tasks|conversations}/{id}/events`: replay the channel from its first record, emit
 * envelopes past `since`, `replay_complete`, then live envelopes and exactly one `end`
 * (BeeOS "Streaming" §3-§4). The replay reads the channel's own records (channel-read.ts) with a
 * projector of its own up to the capsule feed's position, then the stream joins the feed's shared
 * projection of the channel (channel-feed.ts). HTTP details live in routes.
 */
import type { Context } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { Channel } from './channels.js';
import type { ChannelFeeds } from './channel-feeds.js';
import { ChannelListener, HINT_AHEAD, HINT_TRUNCATED, type EncodedStep } from './channel-listener.js';
import { projectorFor, readChannelPage } from './channel-read.js';
import { OFFSET_SLOTS, READ_PAGE } from './constants.js';
import { encodeBackfillTruncated, KEEPALIVE_BYTES } from './codec.js';
import type { ChannelProjector } from './projection.js';
import type { LogRecord } from '../../src/log/record.js';
import { openSse } from './sse-out.js';

export { projectChannel } from './channel-read.js';

/**
 * Envelopes encoded during private replays, per record object and (channel, projector state before
 * it): readers of one channel replaying the same records (a storm of reconnects) encode each
 * envelope once, as the shared projection does live. Entries die with their records.
 */
const replayEncoded = new WeakMap<LogRecord, Map<string, EncodedStep>>();

const step = (
  listener: ChannelListener,
  projector: ChannelProjector,
  record: LogRecord,
  channelId: string,
): void => {
  const before = projector.latestOffset;
  // Same channel and same state: the projector turns this record into the same envelopes.
  const key = `${channelId}\u0000${projector.shareKey()}`;
  const s = projector.project(record);
  let encoded: EncodedStep = [];
  if (s.envelopes.length > 0) {
    let byKey = replayEncoded.get(record);
    const hit = byKey?.get(key);
    encoded = hit ?? [];
    if (!hit) {
      if (!byKey) replayEncoded.set(record, (byKey = new Map()));
      byKey.set(key, encoded);
    }
  }
  listener.onRecord(record, s, encoded, before, projector.latestOffset);
};

/**
 * What streams of the same channel share (encodings, a live projection) under: its id and context,
 * since two owners' chats may have the same conversation id (`chat_<chatId>`) and never one context.
 */
const shareId = (channel: Channel): string => `${channel.id}\u0000${channel.contextId}`;

/** Open the SSE stream of a channel. Resolves once the first checks are done; frames follow. */
export const openChannelStream = async (
  c: Context,
  deps: AdapterDeps,
  feeds: ChannelFeeds,
  channel: Channel,
  sinceIn: number,
  includeDeltas: boolean,
  maxQueuedBytes?: number,
): Promise<Response> => {
  const { core, config } = deps;
  const capsule = channel.capsule;
  const position = await core.position(capsule);
  let listener: ChannelListener | null = null;
  const { stream, response } = openSse(c, {
    heartbeat: { bytes: KEEPALIVE_BYTES, everyMs: config.heartbeatMs },
    // A client that cannot keep up is cut without an `end` (which would mean "terminal, do not
    // reconnect", §3): it reconnects with since=lastOffset and the log replays what it missed.
    // It leaves its projection now, not when its unread bytes are finally let go.
    onOverflow: () => {
      listener?.overflowed();
      return null;
    },
    ...(maxQueuedBytes ? { maxQueuedBytes } : {}),
  });
  let since = sinceIn;
  const start = channel.startOffset;

  if (Math.floor(since / OFFSET_SLOTS) > position.head) {
    stream.write(Buffer.from(encodeBackfillTruncated(position.first * OFFSET_SLOTS, since, HINT_AHEAD)));
    since = 0;
  } else {
    const needed = since === 0 ? start : Math.max(start, Math.floor(since / OFFSET_SLOTS) + 1);
    if (needed < position.first && start < position.first)
      stream.write(
        Buffer.from(encodeBackfillTruncated(position.first * OFFSET_SLOTS, since, HINT_TRUNCATED)),
      );
  }

  const headAtOpen = position.head;
  listener = new ChannelListener(stream, since, includeDeltas, headAtOpen);
  const projector = projectorFor(channel, capsule);
  const readFrom = Math.max(start, position.first);
  if (headAtOpen < readFrom) listener.completeReplay(projector.latestOffset);

  followOwn(listener, projector);
  feeds.track(listener);

  const feed = feeds.feed(capsule, headAtOpen, position.epoch);
  const release = feed.hold(listener);
  listener.onClose(release);
  void replayThenJoin(deps, feeds, channel, listener, projector, readFrom - 1)
    .catch((err: unknown) => {
      deps.logger.warn({ err, capsule, channel: channel.id }, 'beeos: channel replay failed');
      listener.drop(); // the client reconnects with its last offset
    })
    .finally(release);
  return response;
};

/**
 * The listener reports its own projector's progress until it joins a shared one. Set here, not in
 * openChannelStream: a closure there would put the projector in that function's context, which every
 * other closure made there (the transport's onOverflow, the close hooks) keeps for the stream's life.
 */
const followOwn = (listener: ChannelListener, projector: ChannelProjector): void => {
  listener.latest = () => projector.latestOffset;
};

/**
 * Replay on this listener's own projector from `after` up to the feed's position, then join.
 * Records the feed has not dispatched yet are left to it; the last stretch comes from its ring.
 */
const replayThenJoin = async (
  deps: AdapterDeps,
  feeds: ChannelFeeds,
  channel: Channel,
  listener: ChannelListener,
  projector: ChannelProjector,
  afterIn: number,
): Promise<void> => {
  const capsule = channel.capsule;
  let after = afterIn;
  let firstRead = true;
  for (;;) {
    if (!listener.live) return;
    let feed = feeds.get(capsule);
    if (!feed || feed.closed) {
      // The feed ended (drain, or it went idle): a new one starts where this reader is.
      const position = await deps.core.position(capsule);
      if (!listener.live) return;
      if (deps.core.shutdownSignal.aborted) return listener.end('stream_closed', projector.latestOffset);
      if (position.head < after) return listener.drop();
      feed = feeds.get(capsule) ?? feeds.feed(capsule, after, position.epoch);
    }
    const recent = feed.recent(after);
    if (recent) {
      // Synchronous from here: the feed cannot move between the last record and the join. A
      // client that falls behind meanwhile is waited for (a replay is paced, never cut) and the
      // stretch is tried again from where it got.
      let paused = false;
      for (const record of recent) {
        step(listener, projector, record, shareId(channel));
        if (!listener.live) return;
        after = record.offset;
        if (listener.stream.backedUp) {
          paused = true;
          break;
        }
      }
      if (paused) {
        await listener.stream.waitDrain();
        continue;
      }
      after = feed.cursor;
      listener.passed(after, projector.latestOffset);
      if (!listener.live) return;
      feed.join(listener, shareId(channel), channel.contextId, projector);
      return;
    }
    const page = await readChannelPage(
      deps.core,
      capsule,
      channel.contextId,
      after,
      READ_PAGE,
      projector.linkedTasks(),
    );
    if (!listener.live) return;
    // Retention trimmed records this reader had not read yet: it fell behind (as a slow reader
    // would); it reconnects with its last offset and is told what was lost.
    if (!firstRead && page.position.first > after + 1) return listener.drop();
    firstRead = false;
    const limit = feeds.get(capsule)?.cursor ?? Number.POSITIVE_INFINITY;
    let reached = false;
    for (const record of page.records) {
      // Past the feed's position: the feed delivers it (or its ring does).
      if (record.offset > limit) {
        reached = true;
        break;
      }
      step(listener, projector, record, shareId(channel));
      if (!listener.live) return;
      after = record.offset;
      if (listener.stream.backedUp) await listener.stream.waitDrain();
      if (!listener.live) return;
    }
    const scanned = reached ? limit : Math.min(page.next, limit);
    if (scanned > after) {
      after = scanned;
      listener.passed(after, projector.latestOffset);
    } else if (page.records.length === 0 && !feeds.get(capsule)?.recent(after)) {
      // Nothing after us in the log, yet the feed's ring is past us: the log went backwards.
      return listener.drop();
    }
  }
};
