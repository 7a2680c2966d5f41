/**
 * Reads a capsule log through the core into a conversation projector: rebuild the state through an
 * offset (§updates: no persisted replay cache, the state is reduced from the log per read), then
 * project pages after it. Knows nothing about HTTP; live.ts and routes.ts decide what to send.
 */
import type { GatewayCore, WaitResult } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import type { FlueChunk } from './chunks.js';
import { SCAN_PAGE } from './constants.js';
import { FlueError } from './errors.js';
import { ConversationProjector } from './projection.js';

/** The read's offset is from another store generation: the client must start over (§Offsets). */
export const offsetGone = (): FlueError =>
  new FlueError('stream_offset_gone', 'offset is beyond the stream head or from a lost store generation');

/** A projector fed every retained record with offset ≤ `through`. */
export const rebuild = async (
  core: GatewayCore,
  capsule: string,
  conversationId: string,
  epoch: number,
  through: number,
): Promise<ConversationProjector> => {
  const projector = new ConversationProjector(conversationId, epoch);
  let after = 0;
  // Bounded: every page advances `after` by at least one record, and stops at `through`.
  while (after < through) {
    const { records, position } = await core.read(capsule, after, Math.min(SCAN_PAGE, through - after));
    if (position.epoch !== epoch) throw offsetGone();
    if (records.length === 0) break;
    for (const record of records) {
      if (record.offset > through) return projector;
      projector.project(record);
      after = record.offset;
    }
  }
  return projector;
};

/**
 * Chunks are deltas against the state at `after`: when records after it are gone (trimmed by
 * retention, or lost by the store: offsets then jump to its store-reset fact) the deltas would
 * silently miss them, so the client must start over (416, flue-client.md: never `200 []`). After 0
 * (a read from -1) everything retained is read and nothing the client held is missing.
 */
export const assertRetained = (after: number, records: readonly LogRecord[], position: LogPosition): void => {
  if (after === 0) return;
  const first = records[0];
  if (first ? first.offset > after + 1 : after < position.first - 1) throw offsetGone();
};

/** One read cycle's result: chunks after `after`, the next offset, whether the head was reached. */
export interface Cycle {
  chunks: FlueChunk[];
  /** Log offset to resume from (exclusive); advances over records that project to nothing. */
  next: number;
  upToDate: boolean;
}

/** Project records (already read after `after`) and judge whether they reached `position.head`. */
export const projectRecords = (
  projector: ConversationProjector,
  after: number,
  records: readonly LogRecord[],
  position: LogPosition,
  limit: number,
): Cycle => {
  if (position.epoch !== projector.epoch) throw offsetGone();
  assertRetained(after, records, position);
  const chunks: FlueChunk[] = [];
  let next = after;
  for (const record of records) {
    if (record.offset <= next) continue;
    chunks.push(...projector.project(record));
    next = record.offset;
  }
  return { chunks, next, upToDate: records.length < limit && position.head <= next };
};

/** One page after `after`, at most `limit` batches (§updates page size). */
export const readCycle = async (
  core: GatewayCore,
  capsule: string,
  projector: ConversationProjector,
  after: number,
  limit: number,
): Promise<Cycle> => {
  const { records, position } = await core.read(capsule, after, limit);
  return projectRecords(projector, after, records, position, limit);
};

/** One wait (never polls): records after `after` as soon as some exist, or a timeout. */
export const waitCycle = async (
  core: GatewayCore,
  capsule: string,
  projector: ConversationProjector,
  after: number,
  limit: number,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Cycle & { timedOut: boolean }> => {
  const result: WaitResult = await core.waitAfter(capsule, after, limit, timeoutMs, signal);
  const cycle = projectRecords(projector, after, result.records, result.position, limit);
  return { ...cycle, timedOut: result.records.length === 0 };
};
