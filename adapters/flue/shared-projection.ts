/**
 * One conversation's projection shared by every live reader of it in this process: the live feed
 * (live-feed.ts) hands it the records of its context (and those attributed to none) slice by
 * slice; it projects each slice once, encodes the slice's `event: data` once, and gives every
 * follower the same chunks and bytes. A follower is an SSE connection or a parked long-poll.
 */
import type { LogRecord } from '../../src/log/record.js';
import type { FlueChunk } from './chunks.js';
import { encodeDataEvent } from './codec.js';
import type { ConversationProjector } from './projection.js';

/** One read cycle of the shared feed: records (start, end], at most one updates page. */
export class Slice {
  private both: Buffer | null = null;
  private jsonBody: string | null = null;

  constructor(
    /** The offset the state was at before this slice. */
    readonly start: number,
    readonly end: number,
    readonly upToDate: boolean,
    readonly chunks: readonly FlueChunk[],
    /** `event: control` for `end`: the same bytes for every conversation of the capsule. */
    readonly control: Buffer,
    /** The same control event as text (joined to the data event before it is made bytes). */
    private readonly controlText: string,
  ) {}

  /**
   * `event: data` of the chunks then `event: control`: one Buffer, encoded on first use and shared
   * by every follower, so each follower's cycle is one plain write. Made from one string: encoding
   * the data event alone and concatenating Buffers copied every slice's bytes once more.
   */
  get dataAndControl(): Buffer {
    this.both ??= Buffer.from(encodeDataEvent(this.chunks) + this.controlText);
    return this.both;
  }

  /** The chunks as a long-poll body, likewise encoded once. */
  get json(): string {
    this.jsonBody ??= JSON.stringify(this.chunks);
    return this.jsonBody;
  }
}

export type FollowEnd = 'gone' | 'shutdown';

export interface Follower {
  /** The offset whose state the client holds; slices ending at or before it are not for it. */
  after: number;
  /**
   * A slice past `after`. `partial` holds the chunks after `after` when the follower joined in
   * the middle of the slice (rare: a client ahead of the shared state); else use `slice.chunks`.
   * Return false to stop following (a long-poll answered).
   */
  onSlice(slice: Slice, partial: readonly FlueChunk[] | null): boolean;
  /** The feed ended: 'gone' = the store lost or trimmed what follows (416 on reconnect). */
  onEnd(reason: FollowEnd): void;
}

export class SharedProjection {
  /** Null while the state is being rebuilt from the log; `backlog` holds what arrives meanwhile. */
  projector: ConversationProjector | null = null;
  private backlog: LogRecord[] = [];
  private readonly followers = new Set<Follower>();
  /** Readers catching up to join it: the feed keeps it while any is. */
  pins = 0;
  private ended: FollowEnd | null = null;
  /** Last time a follower left or joined (the feed sweeps projections nobody follows). */
  lastUsed = Date.now();
  readonly ready: Promise<void>;

  constructor(
    readonly conversationId: string,
    seed: Promise<{ projector: ConversationProjector; through: number }>,
    /** The feed's cursor (records after the seed's `through` are in backlog until it resolves). */
    private readonly cursor: () => number,
  ) {
    this.ready = seed.then(({ projector, through }) => {
      for (const record of this.backlog) if (record.offset > through) projector.project(record);
      this.backlog = [];
      this.projector = projector;
    });
    // Failures reach whoever awaits `ready`; this keeps an unawaited one from being unhandled.
    this.ready.catch(() => undefined);
  }

  /**
   * The state's offset (meaningful once `projector` is set): the feed's cursor. The feed projects
   * every record of this conversation into it as it passes, so the state is always at the cursor;
   * a cycle with nothing of this conversation need not visit it to say so.
   */
  get through(): number {
    return this.projector ? this.cursor() : 0;
  }

  get followed(): boolean {
    return this.followers.size > 0 || this.pins > 0;
  }

  follow(follower: Follower): void {
    if (this.ended) return follower.onEnd(this.ended);
    this.followers.add(follower);
    this.lastUsed = Date.now();
  }

  unfollow(follower: Follower): void {
    this.followers.delete(follower);
    this.lastUsed = Date.now();
  }

  /** Project one record of this slice (offset order); its chunks, or [] while seeding. */
  project(record: LogRecord): FlueChunk[] {
    if (!this.projector) {
      this.backlog.push(record);
      return [];
    }
    return this.projector.project(record);
  }

  /** Whether the last slice advanced reached the head (see advance). */
  upToDate = false;

  /**
   * The slice is complete: advance and hand it to every follower it concerns. `more`: further
   * slices of the same delivery follow in this turn (the feed pages a delivery of many records).
   */
  advance(slice: Slice, more = false): void {
    if (!this.projector) return;
    // Nothing of this conversation and still up to date: every follower already holds what this
    // slice would tell it (SSE followers were told upToDate, long-polls keep waiting), so none is
    // visited: on a busy capsule that was every follower of every conversation per batch. Where the
    // offset matters (an idle control, a long-poll's timeout) followers take `through`.
    // Nor when nothing of it is in a slice of the middle of a delivery: those are never up to date
    // (a full page), and the delivery's last slice comes in the same turn. Telling every follower
    // of every conversation "not up to date" and, a page later, "up to date" again was two writes
    // per follower per delivery of a page or more: a busy capsule's Flue fan-out that fell a page
    // behind once (a GC pause) paid them on every delivery after, and stayed behind.
    if (slice.chunks.length === 0 && (more || (slice.upToDate && this.upToDate))) return;
    this.upToDate = slice.upToDate;
    for (const follower of this.followers) {
      if (slice.end <= follower.after) continue;
      const partial =
        follower.after > slice.start ? slice.chunks.filter((c) => c.position.batch > follower.after) : null;
      follower.after = slice.end;
      if (!follower.onSlice(slice, partial)) this.followers.delete(follower);
    }
  }

  end(reason: FollowEnd): void {
    this.ended ??= reason;
    const followers = [...this.followers];
    this.followers.clear();
    for (const follower of followers) follower.onEnd(reason);
  }
}
