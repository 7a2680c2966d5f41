/**
 * The bytes of `GET /murmur/{capsule}/records`: each log record as an SSE event whose data is the
 * very JSON text the long-poll returns for it (poll-json.ts), with the offset as `id:`, so both
 * transports of a browser client deliver identical records. Bytes are cached per record object: the
 * hub hands every connection the same objects, so each record is encoded once per process.
 */
import { encodeSse } from '../../src/http/sse.js';
import type { LogPosition } from '../../src/log/store.js';
import type { LogRecord } from '../../src/log/record.js';
import type { FeedFormat } from './feed.js';
import { recordText } from '../../src/http/record-json.js';
import { possiblyMissingGap, type PollGap } from './poll-json.js';

const RECORDS_EVENT = {
  /** `id: <offset>`, data: the poll's record object. */
  record: 'record',
  /** data: the poll's `gap` object (retention, ahead, possibly_missing). */
  gap: 'gap',
  /** First event of every connection, data `{"head":H,"epoch":E}`: a byte that a proxy cannot hold. */
  ready: 'ready',
} as const;

const gapText = (gap: PollGap): string => encodeSse({ event: RECORDS_EVENT.gap, data: JSON.stringify(gap) });

const cache = new WeakMap<LogRecord, Buffer>();

/**
 * One record's event. A frames-possibly-missing fact is preceded by the `possibly_missing` gap the
 * long-poll would report for it, so a reader of gap events alone misses no loss.
 */
export const encodeRecordEvent = (record: LogRecord): Buffer => {
  let bytes = cache.get(record);
  if (bytes === undefined) {
    const gap = possiblyMissingGap(record);
    const text =
      (gap ? gapText(gap) : '') +
      encodeSse({ id: record.offset, event: RECORDS_EVENT.record, data: recordText(record) });
    bytes = Buffer.from(text, 'utf8');
    cache.set(record, bytes);
  }
  return bytes;
};

export const encodeReady = (position: LogPosition): Buffer =>
  Buffer.from(
    encodeSse({
      event: RECORDS_EVENT.ready,
      data: JSON.stringify({ head: position.head, epoch: position.epoch }),
    }),
    'utf8',
  );

/** The feed format of the records stream: a plain tail of the log, gaps in the poll's words. */
export const RECORDS_FORMAT: FeedFormat = {
  tail: true,
  record: encodeRecordEvent,
  cursorGap: (first, status) =>
    Buffer.from(
      gapText({ reason: status === 'gone' ? 'retention' : 'ahead', first_available: first }),
      'utf8',
    ),
};
