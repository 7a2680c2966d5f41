/**
 * Turning what each transport carries into records and gaps, once each and in offset order. Both
 * carry the long-poll's record objects (the SSE stream `GET …/records` wraps each in an event), so
 * one function delivers them. The cursor is the only state: anything at or below it has been
 * delivered (or skipped on purpose).
 */
import type { CapsuleGap, CapsuleRecord } from './types.js';

export interface Sink {
  cursor: number;
  onRecord(record: CapsuleRecord): void;
  onGap(gap: CapsuleGap): void;
}

/** The gap objects the poll answers (`gap`) and the SSE stream writes (`event: gap`). */
export interface WireGap {
  reason: string;
  first_available: number;
}

export interface PollBody {
  records: CapsuleRecord[];
  next_cursor: number;
  head: number;
  epoch: number;
  gap: WireGap | null;
}

/** A record, if new: onRecord, then onGap when it is a loss fact (frames possibly missing, new epoch). */
const record = (sink: Sink, r: CapsuleRecord): void => {
  if (!Number.isSafeInteger(r.offset) || r.offset <= sink.cursor) return;
  sink.cursor = r.offset;
  sink.onRecord(r);
  if (r.kind === 'fact' && r.fact === 'frames-possibly-missing') {
    const reason = String(r.reason);
    sink.onGap({
      type: reason === 'store-reset' ? 'store-reset' : 'frames-possibly-missing',
      reason,
      first_available: r.offset + 1,
      fact_offset: r.offset,
      ...(typeof r.count === 'number' ? { count: r.count } : {}),
    });
  }
};

/**
 * A gap about the cursor (retention: records after it were trimmed; ahead: it is beyond the head,
 * so reading starts over from `first_available`). `possibly_missing` gaps only repeat a loss fact
 * that comes as a record, where it is reported.
 */
const cursorGap = (sink: Sink, gap: WireGap): void => {
  if (!Number.isSafeInteger(gap.first_available)) return;
  if (gap.reason === 'retention') {
    if (gap.first_available - 1 > sink.cursor) sink.cursor = gap.first_available - 1;
    sink.onGap({ type: 'retention', reason: 'retention', first_available: gap.first_available });
  } else if (gap.reason === 'ahead') {
    // The cursor belongs to another log: offsets may go back.
    sink.cursor = gap.first_available - 1;
    sink.onGap({ type: 'cursor-ahead', reason: 'cursor-ahead', first_available: gap.first_available });
  }
};

/** One event of `GET /murmur/{capsule}/records`: `record`, `gap` or `ready` (nothing to deliver). */
export const recordsEvent = (sink: Sink, event: string, data: string): void => {
  if (event !== 'record' && event !== 'gap') return;
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return;
  }
  if (typeof json !== 'object' || json === null) return;
  if (event === 'record') record(sink, json as CapsuleRecord);
  else cursorGap(sink, json as WireGap);
};

/** One long-poll answer. */
export const pollAnswer = (sink: Sink, body: PollBody): void => {
  if (body.gap) cursorGap(sink, body.gap);
  for (const r of body.records) record(sink, r);
  if (body.next_cursor > sink.cursor) sink.cursor = body.next_cursor;
};
