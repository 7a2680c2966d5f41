/**
 * How a native feed writes a live batch of several records (feed.ts, page-bytes.ts): as one chunk,
 * the same Buffer for every connection the batch reaches, byte for byte what the record-by-record
 * path writes, unless a record in it ends the stream (capsule-closed; a final status on
 * message/stream), where the record-by-record path decides exactly where the stream stops.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { encodeRecord } from '../../../adapters/murmur/codec.js';
import { LogFeed } from '../../../adapters/murmur/feed.js';
import type { GatewayCore, SubscribeOptions } from '../../../src/core/types.js';
import type { SseStream } from '../../../src/http/sse-transport.js';
import type { LogRecord } from '../../../src/log/record.js';

const at = 1_700_000_000_000;
const text = (offset: number): LogRecord => ({
  offset,
  kind: 'frame',
  event: 'text',
  upstreamId: String(offset),
  data: `{"text":"chunk ${offset}"}`,
  receivedAt: at,
});
const final = (offset: number): LogRecord => ({
  offset,
  kind: 'frame',
  event: 'status',
  upstreamId: String(offset),
  data: '{"state":"completed","final":true}',
  receivedAt: at,
});
const closed = (offset: number): LogRecord => ({
  offset,
  kind: 'fact',
  fact: 'capsule-closed',
  receivedAt: at,
});

/** A stream that records each write as it was handed over (one entry per write call). */
const recordingStream = (): SseStream & { writes: Buffer[]; ended: boolean } => {
  let open = true;
  const s = {
    writes: [] as Buffer[],
    ended: false,
    get open() {
      return open;
    },
    write: (b: Buffer) => void (open && s.writes.push(b)),
    writeAll: (bs: readonly Buffer[]) => void (open && s.writes.push(...bs)),
    end: (last?: Buffer) => {
      if (last) s.writes.push(last);
      s.ended = true;
      open = false;
    },
    destroy: () => void (open = false),
    queuedBytes: 0,
    backedUp: false,
    waitDrain: () => Promise.resolve(),
    onClose: () => undefined,
    done: new Promise<void>(() => undefined),
    overflowed: false,
  };
  return s;
};

/** A core whose subscribe hands the test the listener (live batches are pushed by hand). */
const coreFor = (): { core: GatewayCore; listeners: SubscribeOptions[] } => {
  const listeners: SubscribeOptions[] = [];
  const core = {
    subscribe: (_c: string, options: SubscribeOptions) => {
      listeners.push(options);
      return { close: () => undefined };
    },
  } as unknown as GatewayCore;
  return { core, listeners };
};

const feedOn = (core: GatewayCore, conn: SseStream, closeOnFinal: boolean): LogFeed => {
  const feed = new LogFeed({
    core,
    capsule: 'c1',
    conn,
    logger: pino({ level: 'silent' }),
    maxQueuedRecords: 1000,
    retryMs: 10,
    gaps: false,
    closeOnFinal,
    capsuleClosedFrame: true,
  });
  // Live from offset 10 on: everything pushed below is past the head it subscribed at.
  feed.start({ after: 10, liveAfter: 10, epoch: 1 });
  return feed;
};

const perRecord = (records: LogRecord[]): Buffer =>
  Buffer.concat(records.map((r) => encodeRecord(r)).filter((b): b is Buffer => b !== null));

describe('native feed, live batches', () => {
  it('writes a live batch of several records as one chunk, the same Buffer for every connection', async () => {
    const { core, listeners } = coreFor();
    const a = recordingStream();
    const b = recordingStream();
    feedOn(core, a, false);
    feedOn(core, b, false);
    const batch = [text(11), text(12), text(13), final(14), text(15)];
    for (const l of listeners) await l.onRecords(batch);
    expect(a.writes).toHaveLength(1);
    expect(a.writes[0]).toEqual(perRecord(batch));
    expect(b.writes[0]).toBe(a.writes[0]);
    expect(a.ended).toBe(false);
    // A single record goes as its own encoded bytes, shared too.
    const one = text(16);
    for (const l of listeners) await l.onRecords([one]);
    expect(a.writes[1]).toBe(encodeRecord(one));
    expect(b.writes[1]).toBe(a.writes[1]);
  });

  it('writes record by record up to a capsule-closed in the batch, then ends the stream', async () => {
    const { core, listeners } = coreFor();
    const conn = recordingStream();
    feedOn(core, conn, false);
    await listeners[0]!.onRecords([text(11), text(12), closed(13), text(14)]);
    expect(Buffer.concat(conn.writes)).toEqual(perRecord([text(11), text(12), closed(13)]));
    expect(conn.writes).toHaveLength(3);
    expect(conn.ended).toBe(true);
  });

  it('on message/stream, stops at the first live final status of a batch', async () => {
    const { core, listeners } = coreFor();
    const conn = recordingStream();
    feedOn(core, conn, true);
    await listeners[0]!.onRecords([text(11), final(12), text(13)]);
    expect(Buffer.concat(conn.writes)).toEqual(perRecord([text(11), final(12)]));
    expect(conn.ended).toBe(true);
  });

  it('skips what it already delivered, then takes the next batch whole', async () => {
    const { core, listeners } = coreFor();
    const conn = recordingStream();
    feedOn(core, conn, false);
    await listeners[0]!.onRecords([text(11), text(12)]);
    await listeners[0]!.onRecords([text(12), text(13)]); // overlaps: the per-record path skips 12
    await listeners[0]!.onRecords([text(14), text(15)]);
    expect(Buffer.concat(conn.writes)).toEqual(perRecord([11, 12, 13, 14, 15].map(text)));
  });
});
