/**
 * One capsule's live channel: the single store reader (tail loop) of this process for that capsule,
 * fanning each batch out to every listener. Catch-up, queues and waiting rules are the listeners'.
 */
import type { LogRecord } from '../log/record.js';
import type { LogPosition, LogStore, ReadResult } from '../log/store.js';
import type { ChannelListener, ChannelOptions, ChannelTap } from './channel-parts.js';
import { lastConsecutive, RecordMemory } from './record-memory.js';

export type { ChannelListener, ChannelOptions, ChannelTap } from './channel-parts.js';

export class CapsuleChannel {
  private readonly listeners = new Set<ChannelListener>();
  /** The listeners as an array, made again only after a join or leave (not one copy per batch). */
  private snapshot: readonly ChannelListener[] | null = null;
  /** The surfaces of the snapshot's subscribers, each once (made with it). */
  private surfaces: readonly string[] = [];
  tap: ChannelTap | null = null;
  private lastSeen = 0;
  private currentEpoch = 0;
  /** Bumped on every epoch reset: results of store calls started before it are stale. */
  private gen = 0;
  private latest: LogPosition | null = null;
  private stopped = false;
  /**
   * Aborts the tail's current wait (stop, reset). One controller serves every wait until it is
   * aborted (a new one per wait was a visible share of a busy capsule's tail loop); aborted between
   * waits, it is simply replaced by the next one.
   */
  private waitAbort: AbortController | null = null;
  private dissolveTimer: NodeJS.Timeout | null = null;
  private retryTimer: { timer: NodeJS.Timeout; wake: () => void } | null = null;
  /**
   * Records of this epoch in memory (record-memory.ts): what the tail loop read, and what catch-up
   * reads brought from the store below it. Hundreds of long-polls or reconnecting watchers at nearby
   * cursors are answered from here instead of each reading the store, and get the same record
   * objects, so each record is decoded and encoded once per process: the one reader per capsule
   * stays one for catch-up too (a cold gateway's resume storm costs a few store reads, not one each).
   */
  private readonly memory: RecordMemory;
  /**
   * The highest `first` (oldest retained offset) any store answer of this epoch reported: memory
   * never answers for records the store is known to have trimmed (the store reports that gap).
   */
  private knownFirst = 0;
  private initialised = false;
  /** Store reads in flight by `after:limit`: readers asking for the same page share one round trip. */
  private readonly inflight = new Map<string, Promise<ReadResult>>();
  private positionRead: Promise<LogPosition> | null = null;
  /** Resolves once the loop knows where the log stands; listeners read the store only after it. */
  readonly ready: Promise<void>;
  /** Settles when the tail loop has exited. */
  readonly done: Promise<void>;

  constructor(
    readonly capsule: string,
    private readonly store: LogStore,
    private readonly options: ChannelOptions,
    private readonly onStop: (channel: CapsuleChannel) => void,
  ) {
    this.memory = new RecordMemory(options.recentRecords);
    this.ready = this.init();
    // Listeners handle an init failure themselves; this keeps it from being an unhandled rejection.
    this.ready.catch(() => this.stop());
    this.done = this.ready.then(
      () => this.loop(),
      () => undefined,
    );
  }

  get epoch(): number {
    return this.currentEpoch;
  }

  get generation(): number {
    return this.gen;
  }

  /** The last position the tail loop (or a listener's read) reported, if any. */
  get position(): LogPosition | null {
    return this.latest;
  }

  get running(): boolean {
    return !this.stopped;
  }

  /**
   * Records after `after` from memory, or null when memory cannot answer (cursor not in what is
   * kept, no tail read yet). An answer is what the store would give: `limit` records, or fewer only
   * when they reach what the tail loop has seen. At the head the answer is empty only when
   * `emptyAtHead`: a listener attached to this channel gets the next batch pushed, a plain read must
   * ask the store instead (it may follow a write the tail loop has not read back yet).
   */
  readRecent(after: number, limit: number, emptyAtHead: boolean): ReadResult | null {
    const position = this.latest;
    if (this.stopped || !position || position.epoch !== this.currentEpoch) return null;
    if (after === this.lastSeen) return emptyAtHead ? { records: [], position } : null;
    if (after > this.lastSeen || after + 1 < this.knownFirst) return null;
    const records = this.memory.slice(after + 1, limit);
    const last = records?.[records.length - 1];
    if (!records || !last) return null;
    if (records.length < limit && last.offset !== this.lastSeen) return null; // the rest is not held
    // The same array for the same page (shared, as a coalesced store read's is): read-only.
    return { records: records as LogRecord[], position };
  }

  /**
   * Records after `after`: from memory when it can answer (see readRecent), else from the store,
   * with concurrent identical reads coalesced into one. What a store read brings below the tail's
   * position is kept in memory for the next reader. Callers treat the records as read-only.
   */
  read(after: number, limit: number, emptyAtHead: boolean): Promise<ReadResult> {
    const recent = this.readRecent(after, limit, emptyAtHead);
    if (recent && (emptyAtHead || recent.records.length > 0)) return Promise.resolve(recent);
    const key = `${after}:${limit}`;
    let pending = this.inflight.get(key);
    if (!pending) {
      const generation = this.gen;
      const initialised = this.initialised;
      pending = this.store.read(this.capsule, after, limit);
      this.inflight.set(key, pending);
      const forget = (): void => {
        if (this.inflight.get(key) === pending) this.inflight.delete(key);
      };
      pending.then((page) => {
        forget();
        if (initialised) this.keep(page, generation);
      }, forget);
    }
    return pending;
  }

  /**
   * The position when `after` is within what this channel holds (inside memory, or at its head):
   * such a cursor is neither trimmed nor ahead, so a poll needs no store round trip to say so.
   */
  knownPosition(after: number): LogPosition | null {
    const position = this.latest;
    if (this.stopped || !position || position.epoch !== this.currentEpoch || after > this.lastSeen)
      return null;
    if (after === this.lastSeen) return position;
    if (after + 1 >= this.knownFirst && this.memory.runAround(after + 1)) return position;
    return null;
  }

  /**
   * The store's position, one request in flight shared by every caller meanwhile (a storm of cursor
   * checks on a cold channel costs one round trip). `joined`: this caller did not start the request,
   * so the answer may predate its call (a head that is older than a cursor it was handed since).
   */
  sharedPosition(): { position: Promise<LogPosition>; joined: boolean } {
    if (this.positionRead) return { position: this.positionRead, joined: true };
    const position = this.store.position(this.capsule);
    this.positionRead = position;
    const forget = (): void => {
      if (this.positionRead === position) this.positionRead = null;
    };
    position.then(forget, forget);
    return { position, joined: false };
  }

  /**
   * A catch-up read's records, kept when the read is of this channel's epoch and generation (never a
   * read that started before a reset). Only what the tail loop has already passed is kept: records
   * above it come through the tail, which extends memory in order.
   */
  private keep(page: ReadResult, generation: number): void {
    const { records, position } = page;
    if (this.stopped || generation !== this.gen || position.epoch !== this.currentEpoch) return;
    this.knownFirst = Math.max(this.knownFirst, position.first);
    let run = lastConsecutive(records);
    const last = run[run.length - 1];
    if (!last) return;
    if (last.offset > this.lastSeen) run = run.filter((r) => r.offset <= this.lastSeen);
    this.memory.absorb(run);
  }

  count(kind: ChannelListener['kind']): number {
    let n = 0;
    for (const listener of this.listeners) if (listener.kind === kind) n++;
    return n;
  }

  join(listener: ChannelListener): void {
    if (this.dissolveTimer) {
      clearTimeout(this.dissolveTimer);
      this.dissolveTimer = null;
    }
    this.listeners.add(listener);
    this.snapshot = null;
  }

  leave(listener: ChannelListener): void {
    if (!this.listeners.delete(listener)) return;
    this.snapshot = null;
    this.linger();
  }

  /**
   * With no listener, stop after `dissolveMs` from now (Centrifuge-style delayed dissolve: a client
   * that reconnects at once finds the reader running, and its memory warm). Plain reads, which
   * never join, call it too, so a channel started by them does not run forever.
   */
  linger(): void {
    if (this.listeners.size > 0 || this.stopped) return;
    if (this.dissolveTimer) clearTimeout(this.dissolveTimer);
    this.dissolveTimer = setTimeout(() => {
      this.dissolveTimer = null;
      if (this.listeners.size === 0) this.stop();
    }, this.options.dissolveMs);
    this.dissolveTimer.unref();
  }

  /**
   * A listener's own store read saw `position`; `generation` is the channel generation when that read
   * started. A different epoch means the store lost the log: reset now rather than at the next tail
   * wake-up. Returns true when the position is consistent with the channel.
   */
  observe(position: LogPosition, generation: number): boolean {
    if (generation !== this.gen || this.stopped) return false;
    // Same epoch: a read may report an older head than the tail has seen (it started earlier).
    if (position.epoch === this.currentEpoch) return true;
    if (position.head >= this.lastSeen) {
      // A new epoch continuing above everything delivered: the read is valid as it stands.
      this.enterEpoch(position);
      return true;
    }
    this.reset(position);
    return false;
  }

  /** Stop the tail loop and end every listener as the hub shuts down. */
  shutdown(): void {
    for (const listener of [...this.listeners]) listener.shutdown();
    this.stop();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.dissolveTimer) clearTimeout(this.dissolveTimer);
    this.waitAbort?.abort();
    this.retryTimer?.wake();
    this.onStop(this);
  }

  private takeSnapshot(): readonly ChannelListener[] {
    const listeners = [...this.listeners];
    const surfaces = new Set<string>();
    for (const l of listeners) if (l.surface !== undefined) surfaces.add(l.surface);
    this.snapshot = listeners;
    this.surfaces = [...surfaces];
    return listeners;
  }

  private async init(): Promise<void> {
    const position = await this.store.position(this.capsule);
    this.latest = position;
    this.currentEpoch = position.epoch;
    this.knownFirst = position.first;
    this.initialised = true;
    // Live delivery starts after the head as of now: a listener's first store read happens after this,
    // so everything its reads do not return is delivered live (no gap at the seam).
    this.lastSeen = position.head;
  }

  private async loop(): Promise<void> {
    const { pageSize, tailWaitMs, logger } = this.options;
    while (!this.stopped) {
      const gen = this.gen;
      // Each wait removes its own abort listener when done (see waitAbort).
      if (!this.waitAbort || this.waitAbort.signal.aborted) this.waitAbort = new AbortController();
      const { signal } = this.waitAbort;
      let result;
      try {
        result = await this.store.waitAfter(this.capsule, this.lastSeen, pageSize, tailWaitMs, signal);
      } catch (err) {
        if (this.stopped) break;
        logger.warn({ capsule: this.capsule, err }, 'hub tail read failed; retrying');
        await this.pause();
        continue;
      }
      if (this.stopped) break;
      if (gen !== this.gen) continue; // a reset happened while this wait was in flight
      const { records, position } = result;
      if (position.head < this.lastSeen) {
        this.reset(position);
        continue;
      }
      if (position.epoch !== this.currentEpoch) this.enterEpoch(position);
      this.latest = position;
      const last = records[records.length - 1];
      if (!last) continue;
      const after = this.lastSeen;
      this.lastSeen = last.offset;
      this.knownFirst = Math.max(this.knownFirst, position.first);
      this.memory.append(records);
      this.tap?.batch(after, records, position);
      // A listener may leave (or another join) during the pass: the snapshot is not changed in place.
      const listeners = this.snapshot ?? this.takeSnapshot();
      for (let i = 0; i < listeners.length; i++) listeners[i]!.push(records, position);
      if (this.surfaces.length > 0) this.options.onDelivered?.(records, this.surfaces);
    }
  }

  /**
   * A new epoch whose offsets continue above everything this channel delivered: memory of the old
   * epoch is dropped (never served under the new one), store reads started before are stale, and
   * listeners keep their cursors: the records after them, the store-reset fact first, come as usual.
   */
  private enterEpoch(position: LogPosition): void {
    this.options.logger.warn(
      { capsule: this.capsule, oldEpoch: this.currentEpoch, epoch: position.epoch, head: position.head },
      'hub: new log epoch; listeners continue from their cursors',
    );
    this.gen++;
    this.memory.clear();
    this.knownFirst = position.first;
    this.inflight.clear();
    this.currentEpoch = position.epoch;
    this.latest = position;
  }

  /** The log went backwards: every listener ends, and the loop follows the log from its head. */
  private reset(position: LogPosition): void {
    this.options.logger.warn(
      { capsule: this.capsule, oldEpoch: this.currentEpoch, epoch: position.epoch, head: position.head },
      'hub: the log went backwards; ending its listeners',
    );
    this.gen++;
    this.memory.clear();
    this.knownFirst = position.first;
    this.inflight.clear();
    this.currentEpoch = position.epoch;
    this.lastSeen = position.head;
    this.latest = position;
    this.waitAbort?.abort();
    this.tap?.reset();
    for (const listener of [...this.listeners]) listener.reset(position);
  }

  private pause(): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.retryTimer = null;
        resolve();
      };
      const timer = setTimeout(wake, this.options.retryMs);
      this.retryTimer = { timer, wake };
    });
  }
}
