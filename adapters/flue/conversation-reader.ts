/**
 * Reads one conversation's records through the core into a projector: the state through an offset
 * (from the nearest cached state, else from the conversation's start), then pages after it. Reads
 * ask for the records of the conversation's context (plus those attributed to none) when the core
 * can answer that, so their cost follows the conversation, not the capsule. Knows nothing about HTTP.
 */
import type { GatewayCore } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import type { FlueChunk } from './chunks.js';
import { SCAN_PAGE } from './constants.js';
import { FlueError } from './errors.js';
import { ConversationProjector } from './projection.js';
import type { SnapshotCache } from './snapshot-cache.js';

/** The read's offset is from another store generation: the client must start over (§Offsets). */
export const offsetGone = (): FlueError =>
  new FlueError('stream_offset_gone', 'offset is beyond the stream head or from a lost store generation');

/** One page of a conversation: its records after `after`, and the offset the page read through. */
export interface ConversationPage {
  records: LogRecord[];
  /** Resume after this (exclusive); past `after` even when only other contexts' records were passed. */
  next: number;
  position: LogPosition;
}

type ContextReader = {
  readContext(
    capsule: string,
    contextId: string,
    after: number,
    limit: number,
  ): Promise<{ records: LogRecord[]; next: number; position: LogPosition }>;
};

/** Null where the core cannot read by context (then whole-capsule pages are read instead). */
const contextReader = (core: GatewayCore): ContextReader | null =>
  typeof (core as Partial<ContextReader>).readContext === 'function'
    ? (core as unknown as ContextReader)
    : null;

/** The seam over `core.readContext` (O(that context)); a whole-capsule page where the core lacks it. */
export const readConversation = async (
  core: GatewayCore,
  capsule: string,
  contextId: string,
  after: number,
  limit: number,
): Promise<ConversationPage> => {
  const byContext = contextReader(core);
  if (byContext) return byContext.readContext(capsule, contextId, after, limit);
  const { records, position } = await core.read(capsule, after, limit);
  return { records, next: records[records.length - 1]?.offset ?? after, position };
};

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
  // Bounded: every page advances `after` (or ends the loop), and stops at `through`.
  while (after < through) {
    const page = await readConversation(deps.core, capsule, conversationId, after, SCAN_PAGE);
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

/**
 * Project a page read after `after` and judge whether it reached `position.head`. Records past
 * `until` are left for later (a catch-up that stops where a shared projection takes over).
 */
export const projectPage = (
  projector: ConversationProjector,
  after: number,
  page: ConversationPage,
  limit: number,
  until = Number.POSITIVE_INFINITY,
): Cycle => {
  const { records, position } = page;
  if (position.epoch !== projector.epoch) throw offsetGone();
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
  const page = await readConversation(core, capsule, projector.conversationId, after, limit);
  if (!contextReader(core)) assertRetained(after, page.records, page.position);
  return projectPage(projector, after, page, limit, until);
};
