/**
 * A page of replay (catch-up records, none of them live) as one Buffer, shared by every connection
 * that replays that page: a resume storm hands thousands of connections the same page array (the
 * hub's memory returns one array per page), and encoding-then-concatenating it per connection was
 * most of the storm's cost. The bytes are those the per-record path writes, in order.
 */
import type { LogRecord } from '../../src/log/record.js';
import { encodeRecord } from './codec.js';

/** Per page array: the bytes without and with possibly-missing `gap` frames. */
const pages = new WeakMap<readonly LogRecord[], { plain?: Buffer | null; gaps?: Buffer | null }>();

/**
 * What a native stream writes for `records` when all are replay: every record's event, except
 * capsule-closed (a replayed close is history) and, without `gaps`, frames-possibly-missing facts.
 * A replayed final status ends nothing either. Null when none has bytes.
 */
export const replayPageBytes = (records: readonly LogRecord[], gaps: boolean): Buffer | null => {
  let entry = pages.get(records);
  const hit = gaps ? entry?.gaps : entry?.plain;
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
  if (!entry) pages.set(records, (entry = {}));
  if (gaps) entry.gaps = page;
  else entry.plain = page;
  return page;
};
