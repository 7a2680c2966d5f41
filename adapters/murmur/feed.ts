/**
 * Feeds one connection from the log through the hub: decides, record by record, what this
 * connection writes (replayed vs live, gaps, capsule-closed, the closing final status), coalesces a
 * batch into one write, and resumes from its own cursor when the hub ends the subscription (slow
 * reader, store error, new epoch). The hub owns reading; the SSE transport (src/http/sse-transport.ts)
 * owns the socket side, its byte bound included.
 */
import { viewFrame } from '../../src/log/frame-view.js';
import type { Logger } from 'pino';
import type { GatewayCore, Subscription, SubscriptionEnd } from '../../src/core/types.js';
import { storeUnreachable } from '../../src/errors.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import type { LogRecord } from '../../src/log/record.js';
import { GAP_REASON } from './constants.js';
import { encodeGap, encodeRecord } from './codec.js';
import { isFinalStatus } from './projection.js';
import { batchMayEnd, pageBytes } from './page-bytes.js';
import type { SseStream } from '../../src/http/sse-transport.js';

/**
 * What a feed writes, as bytes: the native Murmur frames (the default), or another projection of the
 * same log (records.ts's poll-shaped records). Bytes of a record are encoded once per record object,
 * so every connection shares them.
 */
export interface FeedFormat {
  /**
   * A log tail: every record is written as `record` encodes it, replayed or live, and no record ends
   * the stream; the native frame table (finals, capsule-closed, gaps option) does not apply.
   */
  tail: boolean;
  record(record: LogRecord): Buffer | null;
  /** The gap for a cursor older than retention (`gone`) or beyond the head (`ahead`). */
  cursorGap(firstAvailable: number, status: 'gone' | 'ahead'): Buffer;
}

const NATIVE_FORMAT: FeedFormat = {
  tail: false,
  record: encodeRecord,
  cursorGap: (first, status) =>
    encodeGap(first, status === 'gone' ? GAP_REASON.retention : GAP_REASON.cursorAhead),
};

const ownTask = (record: LogRecord, taskId: string): boolean => viewFrame(record)?.taskId === taskId;

export interface FeedOptions {
  core: GatewayCore;
  capsule: string;
  conn: SseStream;
  logger: Logger;
  maxQueuedRecords: number;
  /** Pause before resubscribing after a store error. */
  retryMs: number;
  /** Write `gap` frames for possibly-missing facts (message/stream only when Last-Event-ID was sent). */
  gaps: boolean;
  /**
   * message/stream: end after the first live `status` with `"final":true` (spec "Endpoints"), of any
   * task (true), or of this task only (a task id: from 0.5 the stream closes on its own task's final).
   */
  closeOnFinal: boolean | string;
  /** stream/watch writes `capsule-closed` then ends; message/stream just ends (spec frame table). */
  capsuleClosedFrame: boolean;
  /** Default NATIVE_FORMAT. */
  format?: FeedFormat;
}

/** Where a connection starts reading, after checking its cursor against the log. */
export interface FeedStart {
  /** Deliver records after this offset. */
  after: number;
  /** Records at or below this offset are replay: their final or capsule-closed never ends anything. */
  liveAfter: number;
  epoch: number;
}

/**
 * Check a cursor (spec "Replay", with offsets): older than retention or beyond the head (another
 * epoch) → a `gap` naming the first retained offset, and the replay starts there.
 */
export const checkCursor = async (
  core: GatewayCore,
  capsule: string,
  cursor: number,
  conn: SseStream,
  format: FeedFormat = NATIVE_FORMAT,
): Promise<FeedStart> => {
  const { status, position } = await core.cursorStatus(capsule, cursor);
  // A new epoch alone is no reason to start over: its offsets continue above every offset handed
  // out before and it opens with a store-reset fact, which the replay writes as a `gap` in order.
  if (status === 'ok') return { after: cursor, liveAfter: position.head, epoch: position.epoch };
  conn.write(format.cursorGap(position.first, status));
  return { after: position.first - 1, liveAfter: position.head, epoch: position.epoch };
};

export class LogFeed {
  private subscription: Subscription | null = null;
  private cursor = 0;
  private liveAfter = 0;
  /** null until the first cursor check: then a change of epoch means the offsets restarted. */
  private epoch: number | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  /** The head when this feed last (re)subscribed: records up to it are catch-up, paced by the client. */
  private paceUntil = 0;

  constructor(private readonly options: FeedOptions) {
    void options.conn.done.then(() => this.stop());
  }

  /** Check `cursor` against the log (gap if needed), then deliver from there. */
  begin(cursor: number): void {
    this.cursor = cursor;
    this.epoch = null;
    this.resume();
  }

  /** Start delivering after `start.after`, a start already checked. */
  start(start: FeedStart): void {
    this.cursor = start.after;
    this.liveAfter = start.liveAfter;
    this.epoch = start.epoch;
    this.paceUntil = start.liveAfter;
    this.subscribe();
  }

  stop(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const sub = this.subscription;
    this.subscription = null;
    sub?.close();
  }

  private subscribe(): void {
    const { core, capsule, conn, maxQueuedRecords } = this.options;
    if (!conn.open) return;
    const sub = core.subscribe(capsule, {
      after: this.cursor,
      surface: 'murmur',
      maxQueuedRecords,
      onRecords: (records) => {
        if (this.subscription !== sub) return;
        this.deliver(records);
        // Catch-up (records that were in the log when we subscribed) goes at the client's pace: the
        // hub reads the next page when it has drained. Live records are never held back for one
        // client: a client that cannot keep up passes the transport's byte bound and is ended (the
        // spec's signal for a slow reader: the connection ends), then resumes with Last-Event-ID.
        // backedUp first: it is almost always false, and reading the offset costs (see deliver).
        if (!conn.backedUp) return undefined;
        const last = records[records.length - 1];
        return last && last.offset <= this.paceUntil ? conn.waitDrain() : undefined;
      },
      onEnd: (reason) => {
        if (this.subscription === sub) this.onEnd(reason);
      },
    });
    this.subscription = sub;
  }

  /** One batch → one write. Decisions per record follow the spec's frame table per endpoint. */
  private deliver(records: readonly LogRecord[]): void {
    const { conn, gaps, closeOnFinal, capsuleClosedFrame } = this.options;
    if (!conn.open) return;
    if (this.options.format?.tail) return this.deliverTail(records, this.options.format);
    const n = records.length;
    // A batch of one goes record by record: the same bytes as its page, and one read of its offset.
    // Each `record.offset` read at these sites can cost a boxed number (16 bytes) per connection
    // per batch; on Redis at 100 x 500 the feed's reads of it were a tenth of the gateway's garbage.
    if (n > 1) {
      const first = records[0]!;
      const last = records[n - 1]!;
      if (
        first.offset > this.cursor &&
        (last.offset <= this.liveAfter || !batchMayEnd(records, closeOnFinal))
      ) {
        // All replay, or several live records none of which ends the stream: one chunk, whose bytes
        // are every connection's that gets this batch (page-bytes.ts).
        this.cursor = last.offset;
        const page = pageBytes(records, gaps);
        if (page) conn.write(page);
        return;
      }
    }
    // Each event straight into the connection's queue: no array per delivery (the fan-out hot path).
    let end = false;
    for (let i = 0; i < n; i++) {
      const record = records[i]!;
      const offset = record.offset;
      if (offset <= this.cursor) continue;
      this.cursor = offset;
      const live = offset > this.liveAfter;
      if (record.kind === 'fact') {
        if (record.fact === 'capsule-closed') {
          // A replayed close is history: a client resuming past it must not be ended again.
          if (!live) continue;
          if (capsuleClosedFrame) conn.write(encodeRecord(record)!);
          end = true;
          break;
        }
        if (record.fact === 'frames-possibly-missing' && !gaps) continue;
      }
      const bytes = encodeRecord(record);
      if (bytes) conn.write(bytes);
      if (
        closeOnFinal &&
        live &&
        isFinalStatus(record) &&
        (closeOnFinal === true || ownTask(record, closeOnFinal))
      ) {
        end = true;
        break;
      }
    }
    if (end) {
      this.stop();
      conn.end();
    }
  }

  /**
   * A log tail writes every record. Offsets are contiguous within an epoch, so a jump (other than to
   * a new epoch's store-reset fact) means records were trimmed under this reader: a retention gap,
   * exactly where the long-poll would report one.
   */
  private deliverTail(records: readonly LogRecord[], format: FeedFormat): void {
    const chunks: Buffer[] = [];
    for (const record of records) {
      if (record.offset <= this.cursor) continue;
      if (this.cursor > 0 && record.offset > this.cursor + 1 && !isStoreReset(record))
        chunks.push(format.cursorGap(record.offset, 'gone'));
      this.cursor = record.offset;
      const bytes = format.record(record);
      if (bytes) chunks.push(bytes);
    }
    this.options.conn.writeAll(chunks);
  }

  private onEnd(reason: SubscriptionEnd): void {
    const { conn } = this.options;
    this.subscription = null;
    if (!conn.open) return;
    switch (reason) {
      case 'closed':
        return;
      case 'shutdown':
      case 'store_unreachable':
        // Draining, or this replica lost its store: a capsule that goes away ends the connection;
        // clients resume with Last-Event-ID (on a replica that reaches the store).
        conn.end();
        return;
      case 'slow':
        void conn.waitDrain().then(() => this.resume());
        return;
      case 'store_error':
        this.retryTimer = setTimeout(() => this.resume(), this.options.retryMs);
        return;
    }
  }

  /** (Re)subscribe from our own cursor, checking it first (trimmed meanwhile, or a new epoch). */
  private resume(): void {
    this.retryTimer = null;
    const { core, capsule, conn, logger } = this.options;
    if (!conn.open || this.subscription) return;
    checkCursor(core, capsule, this.cursor, conn, this.options.format).then(
      (start) => {
        if (!conn.open || this.subscription) return;
        if (start.epoch !== this.epoch) this.liveAfter = start.liveAfter;
        this.paceUntil = start.liveAfter;
        this.cursor = start.after;
        this.epoch = start.epoch;
        this.subscribe();
      },
      (err: unknown) => {
        // Cut from the store: end now (the wire's retry signal) rather than hold the client in silence.
        if (storeUnreachable(err)) return conn.end();
        logger.warn({ err, capsule }, 'murmur: resubscribe failed, retrying');
        if (conn.open) this.retryTimer = setTimeout(() => this.resume(), this.options.retryMs);
      },
    );
  }
}
