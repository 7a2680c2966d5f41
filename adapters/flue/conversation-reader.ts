/**
 * Reads one conversation's records through the core into a projector: the state through an offset
 * (from the nearest cached state, else from the conversation's first record), then pages after it.
 * Every read is `core.readContext` (the conversation's context plus records attributed to none: all
 * a projector uses), so its cost follows the conversation, not the capsule. Knows nothing about HTTP.
 */
import type { ContextPage, GatewayCore } from '../../src/core/types.js';
import type { FlueChunk } from './chunks.js';
import { SCAN_PAGE } from './constants.js';
import { FlueError } from './errors.js';
import { ConversationProjector } from './projection.js';
import type { SnapshotCache } from './snapshot-cache.js';

/** The read's offset is from another store generation: the client must start over (§Offsets). */
export const offsetGone = (): FlueError =>
  new FlueError('stream_offset_gone', 'offset is beyond the stream head or from a lost store generation');

export interface ReaderDeps {
  core: GatewayCore;
  cache: SnapshotCache;
}

/** A projector fed every retained record of the conversation with offset ≤ `through`. */
export const rebuild = async (
  deps: ReaderDeps,
  capsule: string,
  conversationId: string,
  epoch: number,
  through: number,
): Promise<ConversationProjector> => {
  const cached = deps.cache.nearest(capsule, conversationId, epoch, through);
  const projector = cached?.projector ?? new ConversationProjector(conversationId, epoch);
  let after = cached?.offset ?? 0;
  if (!cached) {
    // Records before the conversation's first one project to nothing on an empty state.
    const first = await deps.core.contextFirst(capsule, conversationId);
    if (first === null) return projector;
    after = Math.max(0, Math.min(first - 1, through));
  }
  // Bounded: every page advances `after` (or ends the loop), and stops at `through`.
  while (after < through) {
    const page = await deps.core.readContext(capsule, conversationId, after, SCAN_PAGE);
    if (page.position.epoch !== epoch) throw offsetGone();
    for (const record of page.records) {
      if (record.offset > through) return projector;
      projector.project(record);
    }
    if (page.next <= after) break;
    after = page.next;
  }
  return projector;
};

/** One read cycle's result: chunks after `after`, the next offset, whether the head was reached. */
export interface Cycle {
  chunks: FlueChunk[];
  /** Log offset to resume from (exclusive); advances over records that project to nothing. */
  next: number;
  upToDate: boolean;
}

/**
 * Project a page read after `after` and judge whether it reached `position.head`. Records past
 * `until` are left for later (a catch-up that stops where a shared projection takes over).
 */
const projectPage = (
  projector: ConversationProjector,
  after: number,
  page: ContextPage,
  limit: number,
  until = Number.POSITIVE_INFINITY,
): Cycle => {
  const { records, position } = page;
  if (position.epoch !== projector.epoch) throw offsetGone();
  // Chunks are deltas against the state at `after`: when records after it were trimmed (or lost
  // with a store generation) the deltas would silently miss them, so the client must start over
  // (416, which @flue/sdk restarts from; never `200 []`). After 0 (a read from -1) nothing held can be missing.
  if (after !== 0 && after < position.first - 1) throw offsetGone();
  const chunks: FlueChunk[] = [];
  let next = after;
  for (const record of records) {
    if (record.offset <= next) continue;
    if (record.offset > until) return { chunks, next: until, upToDate: false };
    chunks.push(...projector.project(record));
    next = record.offset;
  }
  next = Math.min(Math.max(next, page.next), until);
  return { chunks, next, upToDate: records.length < limit && position.head <= next };
};

/** One page after `after`, at most `limit` batches (§updates page size). */
export const readCycle = async (
  core: GatewayCore,
  capsule: string,
  projector: ConversationProjector,
  after: number,
  limit: number,
  until?: number,
): Promise<Cycle> => {
  const page = await core.readContext(capsule, projector.conversationId, after, limit);
  return projectPage(projector, after, page, limit, until);
};
