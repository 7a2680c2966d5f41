/**
 * `live=sse` on a capsule stream (PROTOCOL.md §5.7): after the offset, every record as JSON messages,
 * one `event: data` per hub batch (a JSON array, §7.1) followed by its `event: control`
 * (`streamNextOffset`, `streamCursor`, `upToDate` once caught up). Bytes go through the gateway's one
 * SSE transport (heartbeats, byte bound, drain). Offsets and validation are offsets.ts's; the route
 * answers 400/404/410 before the stream opens.
 */
import type { Context } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { encodeCommentBytes, encodeSse } from '../../src/http/sse.js';
import { startSse, type SseStream } from '../../src/http/sse-transport.js';
import { now, sharedWheel, type WheelEntry } from '../../src/http/timer-wheel.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { formatOffset } from '../flue/codec.js';
import { recordText } from '../murmur/poll-json.js';
import { nextCursor } from './offsets.js';

/** §8.2: the server closes each SSE connection after about a minute, so CDNs can collapse readers. */
export const SSE_LIFETIME_MS = 60_000;

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

/** Ends the stream when its lifetime is over: an entry on the shared wheel, not a timer each. */
class LifetimeEnd implements WheelEntry {
  wheelDue = 0;
  wheelIndex = -1;
  constructor(private readonly stream: SseStream) {}
  onWheel(): void {
    this.stream.end();
  }
}

/** Open streams per shutdown signal: one listener per gateway, not one per connection. */
const openBySignal = new WeakMap<AbortSignal, Set<SseStream>>();

/** Draining ends every stream; each client resumes from its last control's offset. */
const endOnShutdown = (shutdown: AbortSignal, stream: SseStream): void => {
  let open = openBySignal.get(shutdown);
  if (!open) {
    const set = new Set<SseStream>();
    open = set;
    openBySignal.set(shutdown, set);
    shutdown.addEventListener('abort', () => [...set].forEach((s) => s.end()), { once: true });
  }
  open.add(stream);
  stream.onClose(() => open.delete(stream));
};

const dataEvent = (records: readonly LogRecord[]): string => {
  let json = '[';
  for (let i = 0; i < records.length; i++) json += (i > 0 ? ',' : '') + recordText(records[i]!);
  return encodeSse({ event: 'data', data: `${json}]` });
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
  if (core.shutdownSignal.aborted) {
    stream.end();
    return response;
  }
  endOnShutdown(core.shutdownSignal, stream);
  const lifetime = new LifetimeEnd(stream);
  sharedWheel.schedule(lifetime, now() + read.lifetimeMs, read.lifetimeMs);
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
    maxQueuedRecords: config.maxQueuedRecords,
    onRecords: (records) => {
      if (!stream.open) return undefined;
      // What this connection already sent (a resubscription's overlap) is skipped, not a jump.
      let from = 0;
      while (from < records.length && records[from]!.offset <= next) from++;
      let kept = records.length;
      let lost = false;
      for (let i = from; i < records.length; i++) {
        const r = records[i]!;
        if ((contiguous && r.offset !== next + 1) || (isStoreReset(r) && r.offset > headAtStart)) {
          kept = i;
          lost = true;
          break;
        }
        contiguous = true;
        next = r.offset;
      }
      if (kept > from) {
        if (next >= headAtStart) upToDate = true;
        const batch = from === 0 && kept === records.length ? records : records.slice(from, kept);
        stream.write(Buffer.from(dataEvent(batch), 'utf8'));
        stream.write(control());
      }
      if (lost) {
        sub.close();
        stream.end();
        return undefined;
      }
      // Catch-up goes at the client's pace; live records are never held back for one client (past
      // the byte bound it is ended and resumes).
      return stream.backedUp && next <= headAtStart ? stream.waitDrain() : undefined;
    },
    onEnd: (reason) => {
      // Slow, store error or drain: end; the client resumes from its last control's offset.
      if (reason !== 'closed') stream.end();
    },
  });
  stream.onClose(() => {
    sharedWheel.cancel(lifetime);
    sub.close();
  });
  return response;
};
