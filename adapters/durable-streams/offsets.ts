/**
 * Where a capsule stream read begins and the cursor it hands out, shared by catch-up, long-poll and
 * SSE so the three answer one offset alike (PROTOCOL.md §6, §8.1). Offsets are `EPOCH_OFFSET`
 * (src/http/epoch-offset.ts): an offset of another epoch is 410, never a silent skip.
 */
import type { LogPosition } from '../../src/log/store.js';
import { parseEpochOffset } from '../../src/http/epoch-offset.js';

/** §8.2: the server closes each SSE connection after about a minute, so CDNs can collapse readers. */
export const SSE_LIFETIME_MS = 60_000;

/** §8.1: cursors count 20 s intervals since this origin (2024-10-09T00:00:00Z). */
const CURSOR_ORIGIN_MS = Date.UTC(2024, 9, 9);
const CURSOR_INTERVAL_MS = 20_000;

/** §8.1: the current interval, moved on past a cursor the client echoes so CDNs never loop. */
export const nextCursor = (echoed: string | undefined, nowMs = Date.now()): string => {
  const current = Math.floor((nowMs - CURSOR_ORIGIN_MS) / CURSOR_INTERVAL_MS);
  const prior = echoed !== undefined && /^\d+$/.test(echoed) ? Number(echoed) : -1;
  return String(prior >= current ? prior + 1 + Math.floor(Math.random() * 180) : current);
};

export type Start = { after: number } | { status: 400 | 410; message: string };

const OFFSET_MESSAGES = {
  malformed: 'malformed offset',
  otherEpoch: 'offset from another epoch of this log',
  beyondTail: 'offset beyond the tail of the stream',
  retention: 'offset older than retention',
} as const;

/** Where a read begins: after which log offset, or why it cannot. */
export const startOf = (raw: string | undefined, position: LogPosition): Start => {
  if (raw === undefined || raw === '-1') return { after: 0 };
  if (raw === 'now') return { after: position.head };
  const parsed = parseEpochOffset(raw);
  if (!parsed) return { status: 400, message: OFFSET_MESSAGES.malformed };
  if (parsed.epoch !== position.epoch) return { status: 410, message: OFFSET_MESSAGES.otherEpoch };
  if (parsed.offset > position.head) return { status: 400, message: OFFSET_MESSAGES.beyondTail };
  if (parsed.offset > 0 && parsed.offset < position.first - 1)
    return { status: 410, message: OFFSET_MESSAGES.retention };
  return { after: parsed.offset };
};
