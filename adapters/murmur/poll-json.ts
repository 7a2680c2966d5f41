/**
 * The long-poll response body (pure): log records as JSON, the next cursor, and the gap, if any.
 * Each record is serialised once and cached, since one batch answers every parked poller.
 */
import { isStoreReset } from '../../src/core/store-reset.js';
import type { LogRecord } from '../../src/log/record.js';
import { recordText } from '../../src/http/record-json.js';
import type { LogPosition } from '../../src/log/store.js';

export type PollGap =
  /** Records after the cursor were trimmed; the records start at `first_available`. */
  | { reason: 'retention'; first_available: number }
  /** The cursor is beyond the head (or from an older epoch): start over from `first_available - 1`. */
  | { reason: 'ahead'; first_available: number }
  /**
   * The log records that frames may be missing at `fact_offset` (a frames-possibly-missing fact in
   * this page, the earliest one): frames before `first_available` may be gone.
   */
  | {
      reason: 'possibly_missing';
      first_available: number;
      fact_offset: number;
      missing_reason: string;
      count?: number;
    };

export interface PollBody {
  records: unknown[];
  next_cursor: number;
  head: number;
  epoch: number;
  gap: PollGap | null;
}

/** The `possibly_missing` gap a frames-possibly-missing fact stands for (null for any other record). */
export const possiblyMissingGap = (record: LogRecord): PollGap | null => {
  if (record.kind !== 'fact' || record.fact !== 'frames-possibly-missing') return null;
  const gap: PollGap = {
    reason: 'possibly_missing',
    first_available: record.offset + 1,
    fact_offset: record.offset,
    missing_reason: record.reason,
  };
  if (record.count !== undefined) gap.count = record.count;
  return gap;
};

/** The gap for a page of `records` read after `after` at `position`, the most severe first. */
export const pollGap = (
  after: number,
  records: readonly LogRecord[],
  position: LogPosition,
): PollGap | null => {
  const first = records[0];
  // after = 0 is "from the start" (see cursorStatusAt): nothing it held can have been trimmed. A
  // new epoch's offsets jump ahead and open with its store-reset fact: that fact is the gap.
  if (first && after > 0 && first.offset > after + 1 && !isStoreReset(first))
    return { reason: 'retention', first_available: first.offset };
  if (!first && after > 0 && after < position.first - 1)
    return { reason: 'retention', first_available: position.first };
  if (!first && after > position.head) return { reason: 'ahead', first_available: position.first };
  return earliestMissing(records);
};

/** The `possibly_missing` gap of the earliest frames-possibly-missing fact in `records`, if any. */
export const earliestMissing = (records: readonly LogRecord[]): PollGap | null => {
  for (const record of records) {
    const gap = possiblyMissingGap(record);
    if (gap) return gap;
  }
  return null;
};

/**
 * The response body text. `next_cursor` is the last record's offset; with no records, the cursor
 * itself, or `first_available - 1` under a retention or ahead gap, so a client that follows it
 * starts over from what the log still holds.
 */
export const pollBodyText = (after: number, records: readonly LogRecord[], position: LogPosition): string => {
  return `{"records":[${records.map(recordText).join(',')}],${pollBodyRest(after, records, position)}`;
};

/**
 * What follows the records in the body: `"next_cursor":…,"head":…,"epoch":…,"gap":…}`. `gap` is
 * pollGap's answer when the caller has it already.
 */
export const pollBodyRest = (
  after: number,
  records: readonly LogRecord[],
  position: LogPosition,
  gap: PollGap | null = pollGap(after, records, position),
): string => {
  const last = records[records.length - 1];
  const restart = gap && gap.reason !== 'possibly_missing' ? gap.first_available - 1 : after;
  const nextCursor = last ? last.offset : restart;
  const rest = JSON.stringify({ next_cursor: nextCursor, head: position.head, epoch: position.epoch, gap });
  return rest.slice(1);
};
