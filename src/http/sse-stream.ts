/**
 * The transport-independent half of an SSE stream (src/http/sse-transport.ts): the pending queue and
 * its one flush per event-loop turn, heartbeats and idle callbacks on the shared timer wheel, the
 * byte bound and its overflow, and the close bookkeeping. Sinks (the Node response, or a
 * ReadableStream for contexts without one) only move bytes.
 */
import { now, sharedWheel, type WheelEntry } from './timer-wheel.js';

export interface SseOptions {
  /** HTTP status and extra headers (Content-Type text/event-stream, Cache-Control no-cache and
   *  X-Accel-Buffering no are set by the transport; headers set earlier on the Hono context by
   *  middleware — CORS, X-Request-Id — are kept). */
  status?: number;
  headers?: Record<string, string>;
  /** Written every `everyMs` from open, from the one shared timer wheel (no timer per connection). */
  heartbeat?: { bytes: Buffer; everyMs: number };
  /** Called when nothing was written for `everyMs` (heartbeats do not count); wheel-driven too. */
  idle?: { everyMs: number; onIdle: () => void };
  /** Bound on bytes accepted but not yet taken by the kernel for this client (default 1 MiB). */
  maxQueuedBytes?: number;
  /** Past the bound: return the protocol's closing bytes (or null), the stream then ends; the
   *  client resumes from its cursor. Called at most once. */
  onOverflow?: () => Buffer | null;
  /** When the connection counts as opened (Date.now() ms; default now): heartbeats are due from it
   *  (a stream whose handler awaited something first still beats from the request's arrival). */
  openedAt?: number;
}

export interface SseStream {
  /** False once ending/ended: nothing more will be written. */
  readonly open: boolean;
  /** Queue pre-encoded bytes; everything queued in one event-loop turn leaves in ONE socket write. */
  write(bytes: Buffer): void;
  writeAll(chunks: readonly Buffer[]): void;
  /** Write `last` (optional) after what is queued, then end the response. */
  end(last?: Buffer): void;
  /** Abandon without writing more (before the head was written: the handler may answer otherwise). */
  destroy(): void;
  /** Bytes queued here + in the socket's buffer. */
  readonly queuedBytes: number;
  /** True while the client is behind (queued past a high-water mark): producers should wait. */
  readonly backedUp: boolean;
  /** Resolves when the client has drained below the mark, or the stream is over. */
  waitDrain(): Promise<void>;
  /** Run once when the stream is over (ended by us, client gone, overflow). */
  onClose(fn: () => void): void;
  readonly done: Promise<void>;
  /** True when the stream was ended because the client fell past maxQueuedBytes. */
  readonly overflowed: boolean;
}

/**
 * Process-wide defaults (the composition root or a test may change them before streams open).
 * `endGraceMs`: an ended stream whose bytes the client has not taken by then is destroyed, so a
 * reader that stopped cannot hold its buffer forever.
 */
export const SSE_DEFAULTS = {
  maxQueuedBytes: 1024 * 1024,
  endGraceMs: 10_000,
};

const HIGH_WATER_MAX = 256 * 1024;

/**
 * Streams with bytes queued this turn, flushed together in one setImmediate pass, in the order they
 * were queued. An intrusive list (each stream links the next): an array here grew to one slot per
 * client on every event and was thrown away after the pass.
 */
let dirtyHead: SseStreamBase | null = null;
let dirtyTail: SseStreamBase | null = null;
const flushAll = (): void => {
  let s = dirtyHead;
  dirtyHead = dirtyTail = null;
  while (s) {
    const next = s.nextDirty;
    s.nextDirty = null;
    s.flushNow();
    s = next;
  }
};

/**
 * When the pending flush pass was asked for: the time of every write queued for it, for the idle
 * callbacks. One clock read per pass, not one per write (a Flue fan-out wrote 40,000 times a
 * second, each reading the clock); the idle test needs no finer time than a turn.
 */
let dirtyAt = 0;

const markDirty = (s: SseStreamBase): void => {
  if (dirtyTail) dirtyTail.nextDirty = s;
  else {
    dirtyHead = s;
    dirtyAt = now();
    setImmediate(flushAll);
  }
  dirtyTail = s;
};

/** The time of a write just queued: the pending pass's (see dirtyAt), or now when none is pending. */
const writeTime = (): number => (dirtyHead ? dirtyAt : now());

/** Counters for tests and /metrics: open streams, streams ended by the byte bound, wheel entries and timers. */
export const sseStats = (): {
  open: number;
  overflows: number;
  wheelEntries: number;
  wheelTimers: number;
} => ({
  open: openCount,
  overflows: overflowCount,
  wheelEntries: sharedWheel.size,
  wheelTimers: sharedWheel.timers,
});
let openCount = 0;
let overflowCount = 0;

/** The wheel entry of a stream's idle callback (only streams that ask for one carry it). */
class IdleEntry implements WheelEntry {
  wheelDue = 0;
  wheelIndex = -1;
  lastWrite = now();
  constructor(
    readonly stream: SseStreamBase,
    readonly everyMs: number,
    readonly onIdle: () => void,
  ) {}
  onWheel(t: number): void {
    if (!this.stream.open) return;
    const quietFor = t - this.lastWrite;
    if (quietFor >= this.everyMs - 1) {
      this.lastWrite = t;
      this.onIdle();
    }
    if (this.stream.open) sharedWheel.schedule(this, this.lastWrite + this.everyMs, this.everyMs);
  }
}

/**
 * Everything but the sink: the pending queue, the flush decision, heartbeats, idle, overflow and
 * the close bookkeeping. The stream is its own wheel entry (heartbeat, then the end grace).
 */
export abstract class SseStreamBase implements SseStream, WheelEntry {
  wheelDue = 0;
  wheelIndex = -1;
  /**
   * What this turn queued: the first chunk in `pendingOne`, an array only from the second on. At
   * fan-out a turn queues one event per connection, so the hot path allocates nothing here. (A fresh
   * array per flush, one per connection per event, was its main allocation, and V8 pretenured it:
   * live at every scavenge, it was promoted and died in old space, which brought mark-compacts with
   * 10-20 ms steps every second or two at 1,000 × 40.)
   */
  private pendingOne: Buffer | null = null;
  private pendingMore: Buffer[] | null = null;
  protected pendingBytes = 0;
  private ending = false;
  private closed = false;
  private isDirty = false;
  /** The next stream of the flush list (see flushAll). */
  nextDirty: SseStreamBase | null = null;
  private last: Buffer | null = null;
  private closeFns: (() => void)[] | null = null;
  private drainWaiters: (() => void)[] | null = null;
  private donePromise: Promise<void> | null = null;
  private idleEntry: IdleEntry | null = null;
  private heartbeatBytes: Buffer | null = null;
  /** The heartbeat's period (0: none); the Node sink sets its socket's keep-alive from it. */
  protected heartbeatMs = 0;
  private onOverflowFn: (() => Buffer | null) | null;
  protected readonly maxQueued: number;
  private readonly highWater: number;
  overflowed = false;

  constructor(options: SseOptions) {
    openCount++;
    this.maxQueued = options.maxQueuedBytes ?? SSE_DEFAULTS.maxQueuedBytes;
    this.highWater = Math.min(HIGH_WATER_MAX, Math.floor(this.maxQueued / 2));
    this.onOverflowFn = options.onOverflow ?? null;
    const t = now();
    const opened = options.openedAt === undefined ? t : t - Math.max(0, Date.now() - options.openedAt);
    if (options.heartbeat) {
      this.heartbeatBytes = options.heartbeat.bytes;
      this.heartbeatMs = Math.max(1, options.heartbeat.everyMs);
      sharedWheel.schedule(this, opened + this.heartbeatMs, this.heartbeatMs);
    }
    if (options.idle) {
      const every = Math.max(1, options.idle.everyMs);
      this.idleEntry = new IdleEntry(this, every, options.idle.onIdle);
      sharedWheel.schedule(this.idleEntry, t + every, every);
    }
  }

  /** The sink: bytes the transport holds beyond `pending` (Node: the response's and socket's buffer). */
  protected abstract sinkQueued(): number;
  /** Whether the head is out (Node: written to the socket). */
  protected abstract sinkStarted(): boolean;
  /** Start the sink if it may be (Node: the handler has returned, so the head can be built); false: not yet. */
  protected abstract sinkReady(): boolean;
  /** One turn's bytes, in order (written as one batch: the Node sink corks, the web sink concatenates). */
  protected abstract sinkWrite(chunks: Buffer[]): void;
  /** A turn's only chunk (the fan-out case), without an array around it. */
  protected abstract sinkWriteOne(chunk: Buffer): void;
  /** The last bytes (maybe none), then the end. */
  protected abstract sinkEnd(chunks: Buffer[]): void;
  protected abstract sinkDestroy(): void;
  /** A flush with nothing to write: a sink that holds its head back sends it now. */
  protected flushHead(): void {}

  get open(): boolean {
    return !this.ending && !this.closed;
  }

  get queuedBytes(): number {
    return this.pendingBytes + this.sinkQueued();
  }

  get backedUp(): boolean {
    return this.queuedBytes >= this.highWater;
  }

  get done(): Promise<void> {
    if (!this.donePromise) {
      this.donePromise = this.closed
        ? Promise.resolve()
        : new Promise<void>((resolve) => this.onClose(resolve));
    }
    return this.donePromise;
  }

  write(bytes: Buffer): void {
    if (!this.open) return;
    this.enqueue(bytes);
    this.queued();
    if (this.idleEntry) this.idleEntry.lastWrite = writeTime();
  }

  writeAll(chunks: readonly Buffer[]): void {
    if (!this.open || chunks.length === 0) return;
    for (const chunk of chunks) this.enqueue(chunk);
    this.queued();
    if (this.idleEntry) this.idleEntry.lastWrite = writeTime();
  }

  end(last?: Buffer): void {
    if (!this.open) return;
    this.ending = true;
    this.last = last ?? null;
    this.stopTimers();
    this.scheduleFlush();
  }

  destroy(): void {
    if (this.closed) return;
    const started = this.sinkStarted();
    this.dropPending();
    if (started) this.sinkDestroy();
    this.terminate();
  }

  waitDrain(): Promise<void> {
    if (this.closed || !this.backedUp) return Promise.resolve();
    return new Promise((resolve) => (this.drainWaiters ??= []).push(resolve));
  }

  onClose(fn: () => void): void {
    if (this.closed) fn();
    else (this.closeFns ??= []).push(fn);
  }

  /** Wheel: a heartbeat while open (due from open, never reset by frames); the end grace after. */
  onWheel(t: number): void {
    if (this.closed) return;
    if (this.ending) {
      // Ended, and the client still has not taken the bytes: stop holding them.
      this.sinkDestroy();
      this.terminate();
      return;
    }
    if (!this.heartbeatBytes) return;
    // A heartbeat is not a write for the idle callback (Flue's idle control is due even while
    // comments flow: they do not reset the client's stale timer).
    const quietSince = this.idleEntry?.lastWrite;
    this.write(this.heartbeatBytes);
    if (this.idleEntry && quietSince !== undefined) this.idleEntry.lastWrite = quietSince;
    let next = this.wheelDue + this.heartbeatMs;
    if (next <= t) next = t + this.heartbeatMs; // a stalled loop skips beats rather than bunching them
    if (this.open) sharedWheel.schedule(this, next, this.heartbeatMs);
  }

  /** The flush pass: everything pending in one sink batch, then the end if asked. */
  flushNow(): void {
    this.isDirty = false;
    if (this.closed) return;
    if (!this.sinkReady()) {
      // The handler has not returned yet (its middleware may still add headers): next turn.
      this.scheduleFlush();
      return;
    }
    // The client is not reading and the sink already holds what it could not pass on: keep the
    // turn's bytes here until it drains (drained() flushes them then, as one batch). Node's own
    // buffer would keep one entry per event and hand the kernel all of them in every writev (a
    // 50 s stall at 1,000 ev/s: thousands of entries, rescanned per drain, which held the event
    // loop for seconds). The byte bound counts both (queuedBytes).
    if (!this.ending && this.sinkBlocked()) return;
    const one = this.pendingOne;
    const more = this.pendingMore;
    // Taken before the sink runs: writes it causes (a reentrant close or overflow) queue afresh.
    this.pendingOne = null;
    this.pendingMore = null;
    this.pendingBytes = 0;
    if (this.ending) {
      const batch = more ?? (one ? [one] : []);
      const last = this.last;
      this.last = null;
      if (last) batch.push(last);
      this.sinkEnd(batch);
      if (!this.closed) sharedWheel.schedule(this, now() + SSE_DEFAULTS.endGraceMs, SSE_DEFAULTS.endGraceMs);
      return;
    }
    if (more) this.sinkWrite(more);
    else if (one) this.sinkWriteOne(one);
    else this.flushHead();
    if (this.drainWaiters && !this.backedUp) this.releaseDrainWaiters();
  }

  private enqueue(bytes: Buffer): void {
    if (this.pendingMore) this.pendingMore.push(bytes);
    else if (this.pendingOne) {
      this.pendingMore = [this.pendingOne, bytes];
      this.pendingOne = null;
    } else this.pendingOne = bytes;
    this.pendingBytes += bytes.length;
  }

  private dropPending(): void {
    this.pendingOne = null;
    this.pendingMore = null;
    this.pendingBytes = 0;
  }

  /** The sink drained (Node 'drain'). */
  protected drained(): void {
    if (this.pendingOne || this.pendingMore) this.scheduleFlush();
    if (this.drainWaiters && !this.backedUp) this.releaseDrainWaiters();
  }

  /** Whether the sink asked to be left alone until it drains (Node: a write returned false). */
  protected sinkBlocked(): boolean {
    return false;
  }

  /** The client is gone or the sink is finished: release everything, once. */
  protected terminate(): void {
    if (this.closed) return;
    this.closed = true;
    openCount--;
    this.dropPending();
    this.stopTimers();
    sharedWheel.cancel(this);
    this.releaseDrainWaiters();
    const fns = this.closeFns;
    this.closeFns = null;
    if (fns) for (const fn of fns) fn();
  }

  private queued(): void {
    if (this.pendingBytes + this.sinkQueued() > this.maxQueued) return this.overflow();
    this.scheduleFlush();
  }

  /** Past the bound: drop what was not written, write the protocol's closing bytes, end. */
  private overflow(): void {
    this.overflowed = true;
    overflowCount++;
    this.dropPending();
    const fn = this.onOverflowFn;
    this.onOverflowFn = null;
    this.end(fn?.() ?? undefined);
  }

  protected scheduleFlush(): void {
    if (this.isDirty) return;
    this.isDirty = true;
    markDirty(this);
  }

  private stopTimers(): void {
    if (this.heartbeatBytes) sharedWheel.cancel(this);
    if (this.idleEntry) sharedWheel.cancel(this.idleEntry);
  }

  private releaseDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = null;
    if (waiters) for (const resolve of waiters) resolve();
  }
}
