/**
 * Turning what each transport carries into records and gaps, once each and in offset order. The
 * cursor is the only state: anything at or below it has been delivered (or skipped on purpose).
 */
import type { CapsuleGap, CapsuleRecord } from './types.js';

/** Gap reasons the gateway writes for a cursor rather than for a fact in the log. */
const CURSOR_GAPS = new Set(['retention', 'cursor-ahead', 'epoch-changed']);

export interface Sink {
  cursor: number;
  onRecord(record: CapsuleRecord): void;
  onGap(gap: CapsuleGap): void;
}

const factGap = (offset: number, reason: string, count?: number): CapsuleGap => ({
  type: reason === 'store-reset' ? 'store-reset' : 'frames-possibly-missing',
  reason,
  first_available: offset + 1,
  fact_offset: offset,
  ...(count !== undefined ? { count } : {}),
});

/** Move the cursor to `offset` if it is new; false for anything already delivered. */
const advance = (sink: Sink, offset: number): boolean => {
  if (!Number.isSafeInteger(offset) || offset <= sink.cursor) return false;
  sink.cursor = offset;
  return true;
};

/**
 * One SSE event of `GET /murmur/{capsule}/events`. Frames carry the offset as `id:`; `gap` frames
 * name the next offset (a fact's offset + 1) or, for a cursor problem, the first retained offset.
 * Returns 'closed' for `capsule-closed` (the gateway ends the stream after it).
 */
export const sseEvent = (sink: Sink, event: string, id: string | null, data: string): 'closed' | null => {
  if (event === 'connection-ack') return null;
  if (event === 'capsule-closed') return 'closed';
  if (event === 'gap') {
    let gap: { first_available_id?: unknown; reason?: unknown };
    try {
      gap = JSON.parse(data) as typeof gap;
    } catch {
      return null;
    }
    const first = Number(gap.first_available_id);
    const reason = String(gap.reason ?? 'unknown');
    if (!Number.isSafeInteger(first)) return null;
    if (CURSOR_GAPS.has(reason)) {
      const type = reason === 'retention' ? 'retention' : 'cursor-ahead';
      // Ahead: the cursor belongs to another log; reading starts over (offsets may go back).
      if (type === 'cursor-ahead') sink.cursor = first - 1;
      else if (first - 1 > sink.cursor) sink.cursor = first - 1;
      sink.onGap({ type, reason, first_available: first });
    } else if (advance(sink, first - 1)) sink.onGap(factGap(first - 1, reason));
    return null;
  }
  // A frame without an id cannot be placed by offset; the long-poll skips those too.
  if (id === null || !/^\d+$/.test(id)) return null;
  const offset = Number(id);
  if (advance(sink, offset)) sink.onRecord({ offset, kind: 'frame', event, data });
  return null;
};

interface PollRecord {
  offset: number;
  kind: string;
  event?: string;
  id?: string | null;
  data?: string;
  received_at?: string;
  fact?: string;
  reason?: string;
  count?: number;
}

export interface PollBody {
  records: PollRecord[];
  next_cursor: number;
  head: number;
  epoch: number;
  gap: { reason: string; first_available: number } | null;
}

/** One long-poll answer. Records that SSE does not carry (facts, submissions) only move the cursor. */
export const pollAnswer = (sink: Sink, body: PollBody): void => {
  const gap = body.gap;
  if (gap && gap.reason === 'retention') {
    if (gap.first_available - 1 > sink.cursor) sink.cursor = gap.first_available - 1;
    sink.onGap({ type: 'retention', reason: 'retention', first_available: gap.first_available });
  } else if (gap && gap.reason === 'ahead') {
    sink.cursor = body.next_cursor;
    sink.onGap({ type: 'cursor-ahead', reason: 'cursor-ahead', first_available: gap.first_available });
    return;
  }
  for (const r of body.records) {
    if (!advance(sink, r.offset)) continue;
    if (r.kind === 'frame' && r.event !== 'connection-ack' && r.id !== null && r.id !== undefined) {
      sink.onRecord({
        offset: r.offset,
        kind: 'frame',
        event: String(r.event),
        data: String(r.data),
        id: r.id,
        ...(r.received_at !== undefined ? { received_at: r.received_at } : {}),
      });
    } else if (r.kind === 'fact' && r.fact === 'frames-possibly-missing') {
      sink.onGap(factGap(r.offset, String(r.reason), r.count));
    }
  }
  if (body.next_cursor > sink.cursor) sink.cursor = body.next_cursor;
};
