/**
 * `live=sse` on a capsule stream (PROTOCOL.md §5.7): after the offset, every record as JSON messages,
 * one `event: data` per hub batch, or per part of one within EVENT_BYTES (a JSON array, §7.1),
 * each followed by its `event: control`
 * (`streamNextOffset`, `streamCursor`, `upToDate` once caught up). Bytes go through the gateway's one
 * SSE transport (heartbeats, byte bound, drain). Offsets and validation are offsets.ts's; the route
 * answers 400/404/410 before the stream opens.
 */
import type { Context } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { encodeCommentBytes, encodeSse } from '../../src/http/sse.js';
import { startSse } from '../../src/http/sse-transport.js';
import { endAfter, endOnShutdown } from '../../src/http/sse-ends.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { formatOffset } from '../flue/codec.js';
import { recordText } from '../murmur/poll-json.js';
import { nextCursor } from './offsets.js';

const HEARTBEAT = encodeCommentBytes(' heartbeat');

/**
 * The records are a capsule's whole log (operator scope `observe`): §10.7 asks for `no-store` on
 * confidential streams, and the browser headers it recommends.
 */
const SSE_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'cross-origin-resource-policy': 'cross-origin',
};

export interface CapsuleSseRead {
  capsule: string;
  /** Deliver records with offset > after. */
  after: number;
  position: LogPosition;
  /** The `cursor` the client echoed, if any. */
  cursor: string | undefined;
  lifetimeMs: number;
}

/**
 * A data event holds records up to about this many bytes of JSON (always at least one): a hub page
 * is 500 records, and 500 records of a few kilobytes each would make one event over the per-client
 * byte bound (1 MiB), which ended the stream at once on every reconnect.
 */
const EVENT_BYTES = 256 * 1024;

interface DataEvent {
  bytes: Buffer;
  /** The offset of its last record. */
  last: number;
}

/** The batch as data events of at most EVENT_BYTES of records each (one record may exceed it alone). */
const eventsOf = (records: readonly LogRecord[]): DataEvent[] => {
  const events: DataEvent[] = [];
  let json = '';
  let last = 0;
  const flush = (): void => {
    events.push({ bytes: Buffer.from(encodeSse({ event: 'data', data: `[${json}]` }), 'utf8'), last });
    json = '';
  };
  for (const record of records) {
    const text = recordText(record);
    if (json !== '' && json.length + text.length > EVENT_BYTES) flush();
    json += (json === '' ? '' : ',') + text;
    last = record.offset;
  }
  if (json !== '') flush();
  return events;
};

export const capsuleSseResponse = (deps: AdapterDeps, c: Context, read: CapsuleSseRead): Response => {
  const { core, config } = deps;
  const { capsule, position } = read;
  const headAtStart = position.head;
  let next = read.after;
  let upToDate = false;
  // Never behind the client's echo or an earlier control of this connection (§8.1).
  let cursor = nextCursor(read.cursor);
  const control = (): Buffer => {
    const fresh = nextCursor(undefined);
    if (Number(fresh) > Number(cursor)) cursor = fresh;
    const body: Record<string, unknown> = {
      streamNextOffset: formatOffset(position.epoch, next),
      streamCursor: cursor,
    };
    if (upToDate) body.upToDate = true;
    return Buffer.from(encodeSse({ event: 'control', data: JSON.stringify(body) }), 'utf8');
  };

  const { stream, response } = startSse(c, {
    headers: { ...SSE_HEADERS },
    heartbeat: { bytes: HEARTBEAT, everyMs: config.heartbeatMs },
    idle: { everyMs: config.idleControlMs, onIdle: () => stream.write(control()) },
    // Past the byte bound the stream just ends; the client resumes from its last control's offset.
    onOverflow: () => null,
  });
  endOnShutdown(core.shutdownSignal, stream);
  if (!stream.open) return response;
  endAfter(stream, read.lifetimeMs);
  // §6 `now` and any read from the tail: the first control says where the tail is, and that it is.
  if (next >= headAtStart) {
    upToDate = true;
    stream.write(control());
  }

  // Offsets are contiguous within an epoch: a jump means records were trimmed under this reader,
  // and a store reset past the start means a new epoch. Either ends the stream; the reconnect from
  // the last control's offset is then refused with 410, as a catch-up read would be.
  let contiguous = read.after > 0;
  const sub = core.subscribe(capsule, {
    after: read.after,
    surface: 'durable-streams',
    maxQueuedRecords: config.maxQueuedRecords,
    onRecords: (records) => {
      if (!stream.open) return undefined;
      // What this connection already sent (a resubscription's overlap) is skipped, not a jump.
      let from = 0;
      while (from < records.length && records[from]!.offset <= next) from++;
      let kept = records.length;
      let lost = false;
      let last = next;
      for (let i = from; i < records.length; i++) {
        const r = records[i]!;
        if ((contiguous && r.offset !== last + 1) || (isStoreReset(r) && r.offset > headAtStart)) {
          kept = i;
          lost = true;
          break;
        }
        contiguous = true;
        last = r.offset;
      }
      const batch =
        kept === from ? [] : from === 0 && kept === records.length ? records : records.slice(from, kept);
      const events = eventsOf(batch);
      // Catch-up goes at the client's pace; live records are never held back for one client (past
      // the byte bound it is ended and resumes), but a batch split into several events waits for
      // the client to take each before the next, so no batch of large records overflows by itself.
      const writeFrom = (i: number): Promise<void> | undefined => {
        for (; i < events.length && stream.open; i++) {
          const event = events[i]!;
          next = event.last;
          if (next >= headAtStart) upToDate = true;
          stream.write(event.bytes);
          stream.write(control());
          if (stream.backedUp && (i + 1 < events.length || next <= headAtStart)) {
            const resume = i + 1;
            return stream.waitDrain().then(() => writeFrom(resume));
          }
        }
        if (lost) {
          sub.close();
          stream.end();
        }
        return undefined;
      };
      return writeFrom(0);
    },
    onEnd: (reason) => {
      // Slow, store error or drain: end; the client resumes from its last control's offset.
      if (reason !== 'closed') stream.end();
    },
  });
  stream.onClose(() => sub.close());
  return response;
};
