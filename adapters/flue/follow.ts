/**
 * A Flue conversation as `GET /v1/follow` holds it (`flue:{capsule}/{conversation}`): the update
 * chunks `?view=updates` gives, one event (`data`, the chunk array) per log record that projects to
 * some, its cursor the Flue offset after that record. Projected record by record, so a reconnect
 * between two events (even two of one page) resumes exactly. An offset of another store generation,
 * beyond the head or of records since trimmed is what the Flue routes answer with 416
 * `stream_offset_gone`: here it is an event of the stream (`gap`), and the stream starts over from
 * `-1`, as a Flue client does on that 416.
 *
 * Live, a reader at the head follows the conversation's shared projection on the capsule's Flue
 * live feed (live-feed.ts: one hub subscription per capsule per process, the projection the Flue
 * routes' readers share): each slice is projected once, and its events (and their bytes, see
 * adapters/follow/routes.ts) are made once per process for every reader of the conversation. A
 * reader the shared state is ahead of, a feed of another generation, a feed that ended (a store
 * reset, a trim, a drain) goes back to reads, which tell gaps as before.
 */
import { may, seesCapsule, type Principal } from '../../src/auth/principal.js';
import { ownerContext } from '../../src/auth/namespace.js';
import type { GatewayCore } from '../../src/core/types.js';
import type { FollowEvent, FollowLiveSink, FollowOpen, FollowSource } from '../../src/http/surface.js';
import type { FlueChunk } from './chunks.js';
import { formatOffset, parseOffset } from './codec.js';
import { ORIGIN_OFFSET } from './constants.js';
import type { ConversationIndex } from './conversation-index.js';
import type { FeedRegistry } from './feed-registry.js';
import type { CapsuleFeed } from './live-feed.js';
import { rebuild } from './conversation-reader.js';
import { FlueError } from './errors.js';
import type { ConversationProjector } from './projection.js';
import type { Follower, SharedProjection, Slice } from './shared-projection.js';
import type { SnapshotCache } from './snapshot-cache.js';

export interface FlueFollowDeps {
  core: GatewayCore;
  index: ConversationIndex;
  cache: SnapshotCache;
  feeds: FeedRegistry;
}

const GONE = 'offset is beyond the stream head or from a lost store generation';

/** Where a reader stands: the state through `after` (0 for `-1`) of store generation `epoch`. */
interface Standing {
  cursor: string;
  epoch: number;
  after: number;
  projector: ConversationProjector;
}

/** Chunks as the read gives them: one event per record (`position.batch`) that projects to some. */
const chunkEvents = (epoch: number, chunks: readonly FlueChunk[]): FollowEvent[] => {
  const events: FollowEvent[] = [];
  let run: FlueChunk[] = [];
  for (let i = 0; i < chunks.length; i++) {
    const chunk = chunks[i]!;
    run.push(chunk);
    if (chunks[i + 1]?.position.batch !== chunk.position.batch) {
      events.push({ event: 'data', data: run, cursor: formatOffset(epoch, chunk.position.batch) });
      run = [];
    }
  }
  return events;
};

/** A shared slice's events, made once per slice: every follow reader of the conversation gets them. */
const sliceEvents = new WeakMap<Slice, FollowEvent[]>();

/**
 * Follow `projection` (on `feed`) from `after`, a reader whose own state is through `after`: null
 * when it cannot (the shared state is past it: it reads what lies between).
 */
const joinShared = (
  feed: CapsuleFeed,
  projection: SharedProjection,
  after: number,
  sink: FollowLiveSink,
): { close(): void } | null => {
  const epoch = feed.epoch;
  let closed = false;
  const follower: Follower = {
    after,
    onSlice: (slice, partial) => {
      let events: FollowEvent[];
      if (partial) events = chunkEvents(epoch, partial);
      else {
        events = sliceEvents.get(slice) ?? chunkEvents(epoch, slice.chunks);
        sliceEvents.set(slice, events);
      }
      if (events.length > 0) sink.events(events, formatOffset(epoch, slice.end));
      return true;
    },
    onEnd: () => {
      if (!closed) sink.lost();
    },
  };
  const start = (): boolean => {
    // The shared state is past the reader: the chunks between are the reader's to read.
    if (closed || feed.closed || feed.ended || projection.through > after) return false;
    projection.follow(follower);
    return true;
  };
  if (projection.projector) {
    if (!start()) return null;
  } else {
    // Rebuilding from the log: records meanwhile wait in its backlog; join once it is ready.
    projection.pins++;
    projection.ready.then(
      () => {
        projection.pins--;
        if (!closed && !start()) sink.lost();
      },
      () => {
        projection.pins--;
        if (!closed) sink.lost();
      },
    );
  }
  return {
    close: () => {
      closed = true;
      projection.unfollow(follower);
    },
  };
};

export const flueFollow = (deps: FlueFollowDeps): FollowSource => ({
  scheme: 'flue',
  open: async (principal: Principal, name: string, cursor: string): Promise<FollowOpen> => {
    const { core, index } = deps;
    const slash = name.indexOf('/');
    const capsule = slash < 0 ? name : name.slice(0, slash);
    const chosen = slash < 0 ? '' : name.slice(slash + 1);
    // As the Flue routes: the capsule visible to the key, the `submit` scope, the conversation of
    // the caller's owner (another owner's of the same name is another one), one that exists.
    if (
      chosen.trim() === '' ||
      !core.hasCapsule(capsule) ||
      !seesCapsule(principal, capsule) ||
      !may(principal, 'submit', capsule)
    )
      return { ok: false, status: 404, message: 'no such stream' };
    const conversationId = ownerContext(principal, chosen);
    const parsed = cursor === 'now' ? null : parseOffset(cursor);
    if (cursor !== 'now' && !parsed)
      return { ok: false, status: 400, message: 'the cursor must be -1, now or a Flue offset' };
    const view = await index.lookup(capsule, conversationId);
    if (!view.conversation) return { ok: false, status: 404, message: 'no such stream' };
    const start = cursor === 'now' ? formatOffset(view.epoch, view.head) : cursor;

    let standing: Standing | null = null;
    /** The state a read from `cursor` starts with: the one the last read left, else rebuilt. */
    const stateAt = async (at: string): Promise<{ gone: true } | { gone: false; standing: Standing }> => {
      if (standing?.cursor === at) return { gone: false, standing };
      const p = parseOffset(at);
      const position = await core.position(capsule);
      let after = 0;
      if (p?.kind === 'at') {
        if (p.epoch !== position.epoch || p.offset > position.head) return { gone: true };
        if (p.offset !== 0 && (await core.cursorStatus(capsule, p.offset)).status === 'gone')
          return { gone: true };
        after = p.offset;
      }
      try {
        const projector = await rebuild(deps, capsule, conversationId, position.epoch, after);
        return { gone: false, standing: { cursor: at, epoch: position.epoch, after, projector } };
      } catch (err) {
        if (err instanceof FlueError && err.type === 'stream_offset_gone') return { gone: true };
        throw err;
      }
    };
    const gap = (): { events: FollowEvent[]; cursor: string } => {
      standing = null;
      const data = { code: 'stream_offset_gone', message: GONE };
      return { events: [{ event: 'gap', data, cursor: ORIGIN_OFFSET }], cursor: ORIGIN_OFFSET };
    };

    return {
      ok: true,
      cursor: start,
      target: {
        live: (at, sink) => {
          const s = standing;
          // Only from where the last read left the reader (its offset and generation known).
          if (s?.cursor !== at) return null;
          const feed = deps.feeds.running(capsule) ?? deps.feeds.openAt(capsule, s.epoch, s.after);
          if (feed.epoch !== s.epoch || feed.closed || feed.ended) return null;
          return joinShared(feed, feed.projection(conversationId), s.after, sink);
        },
        read: async (at, limit, waitMs, signal) => {
          const state = await stateAt(at);
          if (state.gone) return gap();
          const s = state.standing;
          standing = s;
          let page = await core.readContext(capsule, conversationId, s.after, limit);
          if (page.records.length === 0 && page.next <= s.after && waitMs > 0 && !signal.aborted) {
            // At the head: one wait on the hub's reader of the capsule, then read what came.
            await core.waitAfter(capsule, page.position.head, 1, waitMs, signal);
            page = await core.readContext(capsule, conversationId, s.after, limit);
          }
          // A new generation, or records after the reader's offset trimmed: deltas would miss them.
          if (page.position.epoch !== s.epoch || (s.after !== 0 && s.after < page.position.first - 1))
            return gap();
          const events: FollowEvent[] = [];
          for (const record of page.records) {
            if (record.offset <= s.after) continue;
            const chunks = s.projector.project(record);
            s.after = record.offset;
            if (chunks.length > 0)
              events.push({ event: 'data', data: chunks, cursor: formatOffset(s.epoch, s.after) });
          }
          s.after = Math.max(s.after, page.next);
          s.cursor = formatOffset(s.epoch, s.after);
          return { events, cursor: s.cursor };
        },
      },
    };
  },
});
