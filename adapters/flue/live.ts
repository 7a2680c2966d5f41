/**
 * The two live read modes (§live=long-poll, §live=sse) on the capsule's live feed: a reader at
 * the shared projection's offset follows it (the same chunks and bytes as every other reader of
 * the conversation); a reader behind it first catches up on its own with reads, then follows;
 * a reader ahead of it follows and skips what it already holds. Headers and validation are
 * routes.ts's concern.
 */
import type { Context } from 'hono';
import type { AdapterConfig } from '../../src/http/adapter-deps.js';
import type { GatewayCore } from '../../src/core/types.js';
import type { FlueChunk } from './chunks.js';
import { encodeControlEvent, encodeDataEvent, encodeHeartbeat, formatOffset } from './codec.js';
import { FIXED_HEADERS, UPDATES_PAGE } from './constants.js';
import { offsetGone, readCycle, type Cycle } from './conversation-reader.js';
import type { FeedRegistry } from './feed-registry.js';
import type { CapsuleFeed } from './live-feed.js';
import type { ConversationProjector } from './projection.js';
import type { SharedProjection, Slice } from './shared-projection.js';
import { startSse, type SseStream } from '../../src/http/sse-transport.js';

export interface LiveDeps {
  core: GatewayCore;
  config: AdapterConfig;
  feeds: FeedRegistry;
  /** The conversation's state through an offset (cached or rebuilt). */
  stateAt: (
    capsule: string,
    conversationId: string,
    epoch: number,
    through: number,
  ) => Promise<ConversationProjector>;
  /** Keep a state a reader is done with (the next read from its offset starts there). */
  keep: (capsule: string, offset: number, projector: ConversationProjector) => void;
}

export interface LiveRead {
  capsule: string;
  conversationId: string;
  epoch: number;
  /** The offset whose state the client holds (0 for -1). */
  after: number;
}

/** A long-poll's answer; `body` is the chunks already encoded when they are shared. */
export type LiveCycle = Cycle & { body?: string };

const HEARTBEAT = Buffer.from(encodeHeartbeat());

/**
 * Control events by epoch, offset and upToDate, shared: every idle reader of a conversation writes
 * the same one every `idleControlMs`, and at 6,500 of them encoding each afresh was most of an idle
 * replica's garbage (enough to keep V8 from giving back the heap a burst of connections grew).
 * Small: cleared when full.
 */
const controls = new Map<string, Buffer>();
const CONTROLS_KEPT = 256;

const control = (epoch: number, next: number, upToDate: boolean): Buffer => {
  const key = `${epoch}:${next}:${upToDate ? 1 : 0}`;
  let bytes = controls.get(key);
  if (!bytes) {
    if (controls.size >= CONTROLS_KEPT) controls.clear();
    bytes = Buffer.from(encodeControlEvent(formatOffset(epoch, next), upToDate));
    controls.set(key, bytes);
  }
  return bytes;
};

/** The feed of the read's generation, and its pinned projection (unpin when following or done). */
const joinFeed = async (
  deps: LiveDeps,
  read: LiveRead,
): Promise<{ feed: CapsuleFeed; projection: SharedProjection }> => {
  let feed = await deps.feeds.feed(read.capsule);
  // Closed while this reader waited for it (its only projection failed to rebuild): start afresh.
  if (feed.closed) feed = await deps.feeds.feed(read.capsule);
  if (feed.epoch < read.epoch) {
    // The store started a new generation the feed has not met yet: its states are all stale.
    feed.end('gone');
    feed = await deps.feeds.feed(read.capsule);
  }
  if (feed.epoch !== read.epoch) throw offsetGone();
  const projection = feed.projection(read.conversationId);
  projection.pins++;
  try {
    await projection.ready;
  } catch (err) {
    projection.pins--;
    throw err;
  }
  return { feed, projection };
};

/**
 * §live=long-poll: answer as soon as chunks exist; hold otherwise until the window ends (then `[]`,
 * up to date). Records of other contexts advance the offset without ending the hold, so a busy
 * capsule does not answer every parked client of a quiet conversation.
 */
export const longPoll = async (deps: LiveDeps, read: LiveRead, signal: AbortSignal): Promise<LiveCycle> => {
  const deadline = Date.now() + deps.config.longPollMaxMs;
  const idle = (next: number): LiveCycle => ({ chunks: [], next, upToDate: true });
  if (signal.aborted || deps.core.shutdownSignal.aborted) return idle(read.after);
  const { projection } = await joinFeed(deps, read);
  let next = read.after;
  let parked = false;
  try {
    let projector: ConversationProjector | null = null;
    // Behind the shared state: read on our own (bounded: each cycle advances `next`).
    while (next < projection.through) {
      projector ??= await deps.stateAt(read.capsule, read.conversationId, read.epoch, next);
      const cycle = await readCycle(deps.core, read.capsule, projector, next, UPDATES_PAGE);
      if (cycle.next <= next) break;
      next = cycle.next;
      if (cycle.chunks.length > 0 || !cycle.upToDate) {
        deps.keep(read.capsule, next, projector);
        return cycle;
      }
      if (signal.aborted || Date.now() >= deadline) return idle(next);
    }
    parked = true;
    projection.pins--;
    return await park(projection, next, deadline, signal, deps.core.shutdownSignal);
  } finally {
    if (!parked) projection.pins--;
  }
};

const park = (
  projection: SharedProjection,
  after: number,
  deadline: number,
  signal: AbortSignal,
  shutdown: AbortSignal,
): Promise<LiveCycle> =>
  new Promise<LiveCycle>((resolve, reject) => {
    const follower = {
      after,
      onSlice: (slice: Slice, partial: readonly FlueChunk[] | null): boolean => {
        const chunks = partial ?? slice.chunks;
        if (chunks.length === 0 && slice.upToDate) return true;
        done();
        resolve({
          chunks: [...chunks],
          next: slice.end,
          upToDate: slice.upToDate,
          ...(partial ? {} : { body: slice.json }),
        });
        return false;
      },
      onEnd: (reason: 'gone' | 'shutdown'): void => {
        done();
        if (reason === 'gone') reject(offsetGone());
        else resolve({ chunks: [], next: Math.max(follower.after, projection.through), upToDate: true });
      },
    };
    const timeout = (): void => {
      projection.unfollow(follower);
      done();
      resolve({ chunks: [], next: Math.max(follower.after, projection.through), upToDate: true });
    };
    const timer = setTimeout(timeout, Math.max(0, deadline - Date.now()));
    signal.addEventListener('abort', timeout, { once: true });
    shutdown.addEventListener('abort', timeout, { once: true });
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', timeout);
      shutdown.removeEventListener('abort', timeout);
    };
    projection.follow(follower);
  });

/**
 * §live=sse: `event: data` per cycle with chunks, `event: control` after every cycle of this
 * conversation (records of other conversations alone make no cycle here, see follow), an idle
 * `upToDate` control when nothing was written for `idleControlMs`, `: heartbeat` every
 * `heartbeatMs` from open. Ends when the client leaves, the gateway drains, or what follows the
 * client's offset is lost (a new store generation, retention): the reconnect then gets 416.
 */
export const sseResponse = (deps: LiveDeps, c: Context, read: LiveRead): Response => {
  let next = read.after;
  // Once following, the projection's offset counts too (slices with nothing for this client are
  // not handed to it one by one, see SharedProjection.advance).
  let at = (): number => next;
  const { stream, response } = startSse(c, {
    headers: { ...FIXED_HEADERS },
    heartbeat: { bytes: HEARTBEAT, everyMs: deps.config.heartbeatMs },
    idle: { everyMs: deps.config.idleControlMs, onIdle: () => stream.write(control(read.epoch, at(), true)) },
    // A client past the byte bound is ended (the stream just ends, as a cut connection would): it
    // reconnects from its last control's offset and loses nothing.
    onOverflow: () => null,
  });
  if (deps.core.shutdownSignal.aborted) {
    stream.end();
    return response;
  }
  void follow(
    deps,
    read,
    stream,
    (offset) => (next = offset),
    (projection) => (at = () => Math.max(next, projection.through)),
  ).catch(() => stream.end());
  return response;
};

const follow = async (
  deps: LiveDeps,
  read: LiveRead,
  stream: SseStream,
  moved: (offset: number) => void,
  following: (projection: SharedProjection) => void,
): Promise<void> => {
  const { projection } = await joinFeed(deps, read);
  let next = read.after;
  let projector: ConversationProjector | null = null;
  let lastUpToDate = false;
  try {
    // Behind the shared state: catch up with reads that stop where it is (bounded: each cycle
    // advances `next`, and the shared state moves only as fast as the log).
    while (stream.open && next < projection.through) {
      projector ??= await deps.stateAt(read.capsule, read.conversationId, read.epoch, next);
      const cycle = await readCycle(
        deps.core,
        read.capsule,
        projector,
        next,
        UPDATES_PAGE,
        projection.through,
      );
      if (cycle.next <= next) throw offsetGone();
      next = cycle.next;
      moved(next);
      if (cycle.chunks.length > 0) stream.write(Buffer.from(encodeDataEvent(cycle.chunks)));
      stream.write(control(read.epoch, next, cycle.upToDate));
      lastUpToDate = cycle.upToDate;
    }
  } finally {
    projection.pins--;
  }
  if (projector) deps.keep(read.capsule, next, projector);
  if (!stream.open) return;
  // What the client last heard about being caught up: the catch-up's last control, or a live one.
  let toldUpToDate = lastUpToDate;
  const follower = {
    after: next,
    onSlice: (slice: Slice, partial: readonly FlueChunk[] | null): boolean => {
      moved(slice.end);
      const chunks = partial ?? slice.chunks;
      if (chunks.length === 0) {
        // Records of other conversations only: no read cycle of this conversation, so no control
        // unless it changes what the client was told (caught up or not). The offset they passed
        // rides the next control (data, or the idle one at least every idleControlMs). Writing a
        // control to every follower of every conversation for each batch of any conversation made
        // a busy capsule's Flue fan-out cost one write per follower per batch, not per chunk.
        if (slice.upToDate !== toldUpToDate) stream.write(slice.control);
      } else if (partial) {
        stream.write(Buffer.from(encodeDataEvent(partial)));
        stream.write(slice.control);
      } else stream.write(slice.dataAndControl);
      toldUpToDate = slice.upToDate;
      return stream.open;
    },
    onEnd: (): void => stream.end(),
  };
  projection.follow(follower);
  following(projection);
  // The projection skips slices that would only repeat "up to date": say it once on joining.
  if (projection.upToDate && !toldUpToDate) {
    stream.write(control(read.epoch, Math.max(next, projection.through), true));
    toldUpToDate = true;
  }
  stream.onClose(() => projection.unfollow(follower));
};
