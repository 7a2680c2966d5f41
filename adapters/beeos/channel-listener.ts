/**
 * One `…/events` connection's own part of a channel stream: what differs between readers of the
 * same projection (`since`, `include_deltas`, the head at open) and the per-stream rules of
 * BeeOS "Streaming" §3-§4 — envelopes past `since`, `replay_complete` once, a store reset's
 * `backfill_truncated`, exactly one `end`. The same code runs while the reader replays on its own
 * and once it shares a projection (channel-feed.ts); the bytes it writes are identical either way.
 */
import { isStoreReset } from '../../src/core/store-reset.js';
import type { LogRecord } from '../../src/log/record.js';
import { OFFSET_SLOTS } from './constants.js';
import type { EndReason } from './constants.js';
import { encodeBackfillTruncated, encodeEnd, encodeEnvelopeBytes, encodeReplayComplete } from './codec.js';
import type { ProjectionStep } from './projection.js';
import type { BeeosSse } from './sse-out.js';

export const HINT_TRUNCATED =
  'records before oldest_redis_offset have aged out of the log; GET /messages for what survives';
export const HINT_RESET =
  'the log store lost records before oldest_redis_offset (store reset); GET /messages for what survives';
export const HINT_AHEAD =
  'since is beyond the head of the log (the store was reset): replaying from the start';

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/**
 * A step's envelopes as bytes, encoded on first need and kept in `encoded` (shared by every
 * listener of a projection, and by replays of the same record): a chunk no listener shows is never
 * built, let alone encoded.
 */
export type EncodedStep = (Buffer | undefined)[];

export class ChannelListener {
  replayDone = false;
  ended = false;
  private readonly closers: (() => void)[] = [];
  /** The latest offset of the projection this listener follows (its own, then the shared one). */
  latest: () => number = () => 0;

  constructor(
    readonly stream: BeeosSse,
    readonly since: number,
    readonly includeDeltas: boolean,
    /** The log head when the stream opened: replay_complete follows the records up to it. */
    readonly headAtOpen: number,
  ) {
    stream.onClose(() => this.close());
  }

  get live(): boolean {
    return !this.ended && this.stream.open;
  }

  /** Run once when the stream is over, however it ended. */
  onClose(fn: () => void): void {
    if (this.ended) fn();
    else this.closers.push(fn);
  }

  completeReplay(latestOffset: number): void {
    if (this.replayDone) return;
    this.replayDone = true;
    this.stream.write(bytes(encodeReplayComplete(Math.max(latestOffset, this.since))));
  }

  end(reason: EndReason, latestOffset: number): void {
    if (this.ended) return;
    this.completeReplay(latestOffset);
    this.ended = true;
    this.stream.end(bytes(encodeEnd(reason)));
    this.close();
  }

  /** End without an `end` frame: the client reconnects with its last offset (not terminal). */
  drop(): void {
    if (this.ended) return;
    this.ended = true;
    this.stream.end();
    this.close();
  }

  /** The transport ended the stream past its byte bound (no `end`): leave the projection now. */
  overflowed(): void {
    if (this.ended) return;
    this.ended = true;
    this.close();
  }

  /**
   * One record of the log, as projected by the projector this listener follows. `latestBefore` and
   * `latestAfter` are the projection's latest offset before and after the record.
   */
  onRecord(
    record: LogRecord,
    step: ProjectionStep,
    encoded: EncodedStep,
    latestBefore: number,
    latestAfter: number,
  ): void {
    if (!this.live) return;
    // A reader of the whole log had already passed the head-at-open record (maybe another
    // context's, never shown here): its replay_complete precedes this record.
    if (record.offset > this.headAtOpen) this.completeReplay(latestBefore);
    // The store lost records before this point (a new epoch starts here): whatever of this
    // channel they held is gone for every reader that had not read past it.
    if (isStoreReset(record) && record.offset * OFFSET_SLOTS > this.since)
      this.stream.write(bytes(encodeBackfillTruncated(record.offset * OFFSET_SLOTS, this.since, HINT_RESET)));
    // Indexed, no callback: this runs per listener per record (a closure here allocated each time).
    const { envelopes } = step;
    for (let i = 0; i < envelopes.length; i++) {
      const p = envelopes[i]!;
      if (p.offset > this.since && (this.includeDeltas || !p.delta))
        this.stream.write((encoded[i] ??= p.bytes ? p.bytes() : encodeEnvelopeBytes(p.envelope)));
    }
    if (step.end) return this.end(step.end, latestAfter);
    // A capsule that closes its stream ends every live channel stream; a closure already in the
    // history does not (the capsule may have come back since).
    if (record.kind === 'fact' && record.fact === 'capsule-closed' && record.offset > this.headAtOpen)
      return this.end('stream_closed', latestAfter);
    if (record.offset >= this.headAtOpen) this.completeReplay(latestAfter);
  }

  /** Every record up to `offset` has been seen (those not shown here included). */
  passed(offset: number, latestOffset: number): void {
    if (this.live && offset >= this.headAtOpen) this.completeReplay(latestOffset);
  }

  private close(): void {
    this.ended = true;
    for (const fn of this.closers.splice(0)) fn();
  }
}
