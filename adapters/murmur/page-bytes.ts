/**
 * A batch of records (a catch-up page, or a live batch of several records) as one Buffer, shared by
 * every connection the same batch array reaches: the hub hands every subscriber the same array (a
 * live batch, a page from its memory or a coalesced store read), so the bytes are built once per
 * batch, not per connection. Per connection, a batch of hundreds of records written record by record
 * left hundreds of chunks in its queue, which the transport then copied into one Buffer per flush
 * for each client (a resuming reader's catch-up past the head it subscribed at, or any client behind
 * at a group-committed capsule's batches); one chunk per batch goes to the socket as it is.
 */
import type { LogRecord } from '../../src/log/record.js';
import { encodeRecord } from './codec.js';
import { isFinalStatus } from './projection.js';

interface PageEntry {
  plain?: Buffer | null;
  gaps?: Buffer | null;
  /** Whether a record of the batch is capsule-closed, and whether one is a final status. */
  closed?: boolean;
  final?: boolean;
}

const pages = new WeakMap<readonly LogRecord[], PageEntry>();

const entryOf = (records: readonly LogRecord[]): PageEntry => {
  let entry = pages.get(records);
  if (!entry) pages.set(records, (entry = {}));
  return entry;
};

/**
 * Whether a record of the batch could end a live stream, so that it must go record by record:
 * capsule-closed (any stream), or a final status where the stream closes on one (`message/stream`).
 */
export const batchMayEnd = (records: readonly LogRecord[], closeOnFinal: boolean | string): boolean => {
  const entry = entryOf(records);
  if (entry.closed === undefined) {
    entry.closed = records.some((r) => r.kind === 'fact' && r.fact === 'capsule-closed');
    entry.final = records.some(isFinalStatus);
  }
  return entry.closed || (closeOnFinal !== false && entry.final === true);
};

/**
 * What a native stream writes for `records` when none of them ends it (replayed, or live with
 * batchMayEnd false): every record's event, except capsule-closed (a replayed close is history) and,
 * without `gaps`, frames-possibly-missing facts. A replayed final status ends nothing either. Null
 * when none has bytes. The bytes are those the per-record path writes, in order.
 */
export const pageBytes = (records: readonly LogRecord[], gaps: boolean): Buffer | null => {
  const entry = entryOf(records);
  const hit = gaps ? entry.gaps : entry.plain;
  if (hit !== undefined) return hit;
  const chunks: Buffer[] = [];
  for (const record of records) {
    if (record.kind === 'fact') {
      if (record.fact === 'capsule-closed') continue;
      if (record.fact === 'frames-possibly-missing' && !gaps) continue;
    }
    const bytes = encodeRecord(record);
    if (bytes) chunks.push(bytes);
  }
  const page = chunks.length > 0 ? Buffer.concat(chunks) : null;
  if (gaps) entry.gaps = page;
  else entry.plain = page;
  return page;
};
