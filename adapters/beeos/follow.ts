/**
 * A BeeOS task or conversation as `GET /v1/follow` holds it (`beeos:{agent}/tasks/{id}`,
 * `beeos:{agent}/conversations/{id}`): the envelopes `…/events` streams (`message`, deltas left
 * out as that route does by default), its `end` and its `backfill_truncated` notices, each an event
 * of the stream; the cursor is BeeOS `since`. The channel is projected record by record from its
 * first record (as `…/events` replays it), so each event's cursor is exact: a message's is its
 * envelope offset, and once a record is read the cursor moves past every slot of it
 * (`offset * OFFSET_SLOTS + OFFSET_SLOTS - 1`), so an `end` or a notice is never told twice.
 *
 * Live, a reader at the head joins the channel's shared projection on the capsule's BeeOS live feed
 * (channel-feed.ts: one hub subscription per capsule per process, the projections the `…/events`
 * streams share), closing the stretch to the feed's position from its ring as those streams do:
 * each record is projected once for every reader of the channel, and each message's event (and its
 * bytes, see adapters/follow/routes.ts) is made once per process. A reader the feed is behind, one
 * the ring no longer covers, a feed that ends (drain, a log that no longer continues it) or a
 * channel that ends goes back to reads, which replay and tell what was lost as before.
 */
import { may, seesCapsule, type Principal } from '../../src/auth/principal.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import type { GatewayCore } from '../../src/core/types.js';
import type { FollowEvent, FollowLiveSink, FollowOpen, FollowSource } from '../../src/http/surface.js';
import type { LogRecord } from '../../src/log/record.js';
import type { ChannelFeeds } from './channel-feeds.js';
import { shareId } from './channel-stream.js';
import type { Channel, ChannelRegistry } from './channels.js';
import { HINT_AHEAD, HINT_RESET, HINT_TRUNCATED, type FeedListener } from './channel-listener.js';
import { projectorFor, readChannelPage } from './channel-read.js';
import { OFFSET_SLOTS } from './constants.js';
import type { ChannelProjector, ProjectionStep } from './projection.js';

export interface BeeosFollowDeps {
  core: GatewayCore;
  registry: ChannelRegistry;
  feeds: ChannelFeeds;
}

const NAME = /^([^/]+)\/(tasks|conversations)\/([^/]+)$/;
const SINCE = /^\d{1,16}$/;
/** The last `since` of a log record: past every envelope it projects to. */
const pastRecord = (offset: number): number => offset * OFFSET_SLOTS + OFFSET_SLOTS - 1;

interface Standing {
  cursor: string;
  /** The log's generation as the last read saw it: a feed started for this reader follows it. */
  epoch: number;
  /** Envelopes at or below it are told. */
  since: number;
  /** Log records up to it are projected. */
  after: number;
  projector: ChannelProjector;
}

const truncated = (oldest: number, since: number, hint: string, cursor: number): FollowEvent => ({
  event: 'backfill_truncated',
  data: { oldest_redis_offset: oldest, since, hint },
  cursor: String(cursor),
});

/** A message's event, made once per envelope object: every reader of a shared projection gets it. */
const messageEvents = new WeakMap<object, FollowEvent>();
const messageEvent = (envelope: object, offset: number): FollowEvent => {
  let ev = messageEvents.get(envelope);
  if (!ev) messageEvents.set(envelope, (ev = { event: 'message', data: envelope, cursor: String(offset) }));
  return ev;
};

/**
 * The events of one projected record past `since`, as the read tells them (a store reset's notice,
 * messages without deltas, the channel's `end`); `since` after it.
 */
const recordEvents = (
  record: LogRecord,
  step: ProjectionStep,
  since: number,
): { events: FollowEvent[]; since: number } => {
  const events: FollowEvent[] = [];
  if (isStoreReset(record) && record.offset * OFFSET_SLOTS > since)
    events.push(truncated(record.offset * OFFSET_SLOTS, since, HINT_RESET, since));
  for (const p of step.envelopes)
    if (p.offset > since && !p.delta) events.push(messageEvent(p.envelope, p.offset));
  const past = pastRecord(record.offset);
  if (step.end && past > since)
    events.push({ event: 'end', data: { reason: step.end }, cursor: String(past) });
  return { events, since: Math.max(since, past) };
};

/** A `/v1/follow` reader joined to a channel's shared projection (channel-feed.ts). */
class FollowListener implements FeedListener {
  readonly replayDone = true;
  ended = false;
  latest: () => number = () => 0;
  private readonly closers: (() => void)[] = [];

  constructor(
    private since: number,
    private readonly sink: FollowLiveSink,
  ) {}

  onClose(fn: () => void): void {
    if (this.ended) fn();
    else this.closers.push(fn);
  }

  onRecord(record: LogRecord, step: ProjectionStep): void {
    if (this.ended) return;
    const { events, since } = recordEvents(record, step, this.since);
    this.since = since;
    if (events.length > 0) this.sink.events(events, String(since));
    // The channel ended: what follows (nothing of it) is the reads' to tell.
    if (step.end) this.drop();
  }

  passed(): void {}

  end(): void {
    this.drop();
  }

  /** Back to reads from the cursor (a drain, a feed the log no longer continues, an end). */
  drop(): void {
    if (this.ended) return;
    this.close();
    this.sink.lost();
  }

  close(): void {
    this.ended = true;
    for (const fn of this.closers.splice(0)) fn();
  }
}

export const beeosFollow = (deps: BeeosFollowDeps): FollowSource => ({
  scheme: 'beeos',
  open: async (principal: Principal, name: string, cursor: string): Promise<FollowOpen> => {
    const { core, registry } = deps;
    const none: FollowOpen = { ok: false, status: 404, message: 'no such stream' };
    const m = NAME.exec(name);
    if (!m) return none;
    const agent = m[1]!;
    const kind: Channel['kind'] = m[2] === 'tasks' ? 'task' : 'conversation';
    // As guardAgent and guardChannel: the agent visible to the key, the `submit` scope, a channel
    // of that kind of the caller's owner (another owner's is not found, like an unknown one).
    if (!core.hasCapsule(agent) || !seesCapsule(principal, agent) || !may(principal, 'submit', agent))
      return none;
    if (cursor !== '-1' && cursor !== 'now' && !(SINCE.test(cursor) && Number.isSafeInteger(Number(cursor))))
      return { ok: false, status: 400, message: 'the cursor must be -1, now or a since offset' };
    const channel = await registry.get(agent, m[3]!, principal.owner);
    if (!channel || channel.kind !== kind || channel.owner !== principal.owner) return none;
    if (channel.pending) await channel.pending.catch(() => undefined);
    const start =
      cursor === '-1'
        ? '0'
        : cursor === 'now'
          ? String(pastRecord((await core.position(agent)).head))
          : cursor;

    let standing: Standing | null = null;
    /** A projector from the channel's first retained record, and the notices `…/events` opens with. */
    const replay = async (at: string): Promise<{ standing: Standing; events: FollowEvent[] }> => {
      let since = Number(at);
      const position = await core.position(agent);
      const events: FollowEvent[] = [];
      const first = channel.startOffset;
      if (Math.floor(since / OFFSET_SLOTS) > position.head) {
        events.push(truncated(position.first * OFFSET_SLOTS, since, HINT_AHEAD, 0));
        since = 0;
      } else {
        const needed = since === 0 ? first : Math.max(first, Math.floor(since / OFFSET_SLOTS) + 1);
        if (needed < position.first && first < position.first) {
          const passed = Math.max(since, pastRecord(position.first - 1));
          events.push(truncated(position.first * OFFSET_SLOTS, since, HINT_TRUNCATED, passed));
          since = passed;
        }
      }
      const after = Math.max(first, position.first) - 1;
      const projector = projectorFor(channel, agent);
      const standing = { cursor: String(since), epoch: position.epoch, since, after, projector };
      return { standing, events };
    };

    return {
      ok: true,
      cursor: start,
      target: {
        live: (at, sink) => {
          const s = standing;
          // Only from where the last read left the reader (its projector and generation known).
          if (s?.cursor !== at) return null;
          const { feeds } = deps;
          const running = feeds.get(agent);
          const feed = running && !running.closed ? running : feeds.feed(agent, s.after, s.epoch);
          // A feed behind the reader cannot give it the records between: it waits on a read.
          if (feed.closed || feed.cursor < s.after) return null;
          const recent = feed.cursor > s.after ? feed.recent(s.after) : [];
          if (!recent) return null;
          // From here synchronous: the feed cannot move between the last record and the join.
          const events: FollowEvent[] = [];
          for (const record of recent) {
            const step = recordEvents(record, s.projector.project(record), s.since);
            events.push(...step.events);
            s.since = step.since;
            s.after = record.offset;
          }
          // The projector may now be the shared one: no read may move it.
          standing = null;
          const listener = new FollowListener(s.since, sink);
          if (events.length > 0) sink.events(events, String(s.since));
          if (events.some((e) => e.event === 'end')) {
            // The channel ended in the stretch: what follows is the reads' to tell.
            sink.lost();
            return { close: () => undefined };
          }
          feed.join(listener, shareId(channel), channel.contextId, s.projector);
          return { close: () => listener.close() };
        },
        read: async (at, limit, waitMs, signal) => {
          let events: FollowEvent[] = [];
          if (standing?.cursor !== at) ({ standing, events } = await replay(at));
          const s = standing;
          const read = () =>
            readChannelPage(core, agent, channel.contextId, s.after, limit, s.projector.linkedTasks());
          let page = await read();
          if (
            events.length === 0 &&
            page.records.length === 0 &&
            page.next <= s.after &&
            waitMs > 0 &&
            !signal.aborted
          ) {
            // At the head: one wait on the hub's reader of the capsule, then read what came.
            await core.waitAfter(agent, page.position.head, 1, waitMs, signal);
            page = await read();
          }
          if (page.position.first > s.after + 1 && s.after + 1 >= channel.startOffset) {
            // Records this reader had not read were trimmed: start over, told what was lost.
            standing = null;
            return { events, cursor: s.cursor };
          }
          for (const record of page.records) {
            if (record.offset <= s.after) continue;
            if (isStoreReset(record) && record.offset * OFFSET_SLOTS > s.since)
              events.push(truncated(record.offset * OFFSET_SLOTS, s.since, HINT_RESET, s.since));
            const step = s.projector.project(record);
            for (const p of step.envelopes)
              if (p.offset > s.since && !p.delta)
                events.push({ event: 'message', data: p.envelope, cursor: String(p.offset) });
            const past = pastRecord(record.offset);
            if (step.end && past > s.since)
              events.push({ event: 'end', data: { reason: step.end }, cursor: String(past) });
            s.after = record.offset;
            s.since = Math.max(s.since, past);
          }
          if (page.next > s.after) {
            s.after = page.next;
            s.since = Math.max(s.since, pastRecord(page.next));
          }
          s.cursor = String(s.since);
          return { events, cursor: s.cursor };
        },
      },
    };
  },
});
