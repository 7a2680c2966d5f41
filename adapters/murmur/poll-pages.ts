/**
 * Long-poll bodies of large pages as bytes, shared between the answers that repeat them. A resume
 * storm asks for the same page thousands of times (the hub hands every reader the same record
 * objects): joining and encoding a thousand records per answer, then copying it, was most of its
 * cost. The same bytes as pollBodyText, byte for byte.
 */
import { isStoreReset } from '../../src/core/store-reset.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { recordText } from '../../src/http/record-json.js';
import { earliestMissing, pollBodyRest, pollBodyText, type PollGap } from './poll-json.js';

/** Smaller pages are cheap to build per answer; caching them would only churn the cache. */
const MIN_RECORDS = 32;
/** The cache's bound: encoded records parts plus the last whole body of each. */
const MAX_BYTES = 32 * 1024 * 1024;

interface Page {
  /** The page's first and last record objects: the same objects are the same records. */
  first: LogRecord;
  last: LogRecord;
  /** `{"records":[…]` as bytes. */
  records: Buffer;
  /** The page's earliest possibly-missing fact as a gap (pollGap's loop over the records). */
  missing: PollGap | null;
  /** The last whole body built on it (cursor, head and epoch as of that answer). */
  body: { rest: string; bytes: Buffer } | null;
}

/** Least recently used first. */
const pages = new Map<string, Page>();
let cachedBytes = 0;

const sizeOf = (page: Page): number => page.records.length + (page.body?.bytes.length ?? 0);

const remember = (key: string, page: Page): void => {
  pages.set(key, page);
  cachedBytes += sizeOf(page);
  for (const [k, old] of pages) {
    if (cachedBytes <= MAX_BYTES) break;
    pages.delete(k);
    cachedBytes -= sizeOf(old);
  }
};

const pageOf = (records: readonly LogRecord[]): Page => {
  const first = records[0]!;
  const last = records[records.length - 1]!;
  const key = `${first.offset}:${last.offset}:${records.length}`;
  const hit = pages.get(key);
  if (hit) {
    pages.delete(key);
    cachedBytes -= sizeOf(hit);
    if (hit.first === first && hit.last === last) {
      remember(key, hit); // most recently used
      return hit;
    }
  }
  const page: Page = {
    first,
    last,
    records: Buffer.from(`{"records":[${records.map(recordText).join(',')}]`, 'utf8'),
    missing: earliestMissing(records),
    body: null,
  };
  if (page.records.length <= MAX_BYTES / 16) remember(key, page);
  return page;
};

/** pollBodyText(after, records, position) as UTF-8 bytes. */
export const pollBodyBytes = (
  after: number,
  records: readonly LogRecord[],
  position: LogPosition,
): Uint8Array<ArrayBuffer> => {
  if (records.length < MIN_RECORDS)
    return Buffer.from(pollBodyText(after, records, position), 'utf8') as Uint8Array<ArrayBuffer>;
  const page = pageOf(records);
  // pollGap with the records' part cached (records is not empty here).
  const first = page.first;
  const gap =
    after > 0 && first.offset > after + 1 && !isStoreReset(first)
      ? ({ reason: 'retention', first_available: first.offset } as const)
      : page.missing;
  const rest = `,${pollBodyRest(after, records, position, gap)}`;
  if (page.body?.rest === rest) return page.body.bytes as Uint8Array<ArrayBuffer>;
  const bytes = Buffer.concat([page.records, Buffer.from(rest, 'utf8')]);
  const before = sizeOf(page);
  page.body = { rest, bytes };
  if (pages.get(`${first.offset}:${page.last.offset}:${records.length}`) === page)
    cachedBytes += sizeOf(page) - before;
  return bytes as Uint8Array<ArrayBuffer>;
};
