/**
 * The embedded store of general streams: zero setup, nothing survives a restart (like the embedded
 * capsule log). Each call runs to completion on the event loop, so every append, with its producer
 * state and Stream-Seq, is atomic by construction. Epochs come from one process-wide counter, so a
 * stream deleted and created again never reuses an offset. A fork holds its source by reference
 * (the source's `refs` counts its living forks), so a soft-deleted source keeps its messages for them.
 */
import {
  forkAliases,
  forkConfigOf,
  forkPointOf,
  forkSpecOf,
  MAX_FORK_DEPTH,
  resolveOffset,
  sameAsExisting,
  TOO_DEEP,
} from './forks.js';
import { checkProducer, type ProducerState } from './producer-check.js';
import { StreamWaiters } from './waiters.js';
import type {
  AppendInput,
  AppendResult,
  CreateResult,
  DeleteResult,
  ForkRequest,
  ReadResult,
  StreamBounds,
  StreamConfig,
  StreamMeta,
  StreamStore,
  WaitOutcome,
} from './types.js';

interface MemoryStream {
  path: string;
  meta: StreamMeta;
  /**
   * The last page read, handed out again as the same array to a read of the same page while the
   * tail has not moved: many readers catching up through one page then share the body the surface
   * builds beside it (general-read.ts), as the Redis store's read cache does.
   */
  lastPage?: { after: number; maxEntries: number; maxBytes: number; tail: number; entries: Buffer[] };
  /** The stream's own messages, at positions forkPoint + 1 onwards. */
  entries: Buffer[];
  /** Positions up to here are the parent's (0 for a stream that is no fork). */
  forkPoint: number;
  parent: MemoryStream | null;
  /** Living forks of this stream. */
  refs: number;
  /** forkSpecOf the PUT that created it ('' for no fork). */
  spec: string;
  lastStreamSeq: string | null;
  producers: Map<string, ProducerState>;
  /** The producer tuple whose batch closed the stream: its retry is a duplicate, not a 409. */
  closedBy: string | null;
  /** Whose share of maxStreamsPerOwner it counts against while live (null: nobody's). */
  owner: string | null;
}

const SWEEP_MS = 60_000;

const tupleOf = (p: { id: string; epoch: number; seq: number }): string => `${p.id}\n${p.epoch}\n${p.seq}`;

const expiryOf = (config: StreamConfig, nowMs: number): number | null =>
  config.ttlSeconds !== null
    ? nowMs + config.ttlSeconds * 1000
    : config.expiresAt !== null
      ? Date.parse(config.expiresAt)
      : null;

export class MemoryStreamStore implements StreamStore {
  private readonly streams = new Map<string, MemoryStream>();
  private readonly waiters = new StreamWaiters();
  private generation = 0;
  /** Soft-deleted streams: kept for their forks, they no longer count towards maxStreams. */
  private gone = 0;
  /** Live (not soft-deleted) streams per owner, for maxStreamsPerOwner. */
  private readonly owned = new Map<string, number>();
  /** Expired streams nobody touches are dropped this often (memory, not correctness: access checks expiry). */
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly bounds: StreamBounds) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /**
   * The stream at `path` (perhaps soft-deleted); an expired one is removed here (expiry is checked on
   * access), or soft-deleted while forks still read it.
   */
  private live(path: string): MemoryStream | undefined {
    const s = this.streams.get(path);
    if (s && !s.meta.gone && s.meta.expiresAtMs !== null && s.meta.expiresAtMs <= Date.now()) {
      return this.drop(s) ? undefined : s;
    }
    return s;
  }

  /** A live stream leaves its owner's count (removed, or soft-deleted). */
  private disown(s: MemoryStream): void {
    if (s.owner === null) return;
    const n = (this.owned.get(s.owner) ?? 1) - 1;
    if (n > 0) this.owned.set(s.owner, n);
    else this.owned.delete(s.owner);
  }

  /** Removes `s` (live), or soft-deletes it while it has forks; true when removed. */
  private drop(s: MemoryStream): boolean {
    this.waiters.wake(s.path);
    this.disown(s);
    if (s.refs > 0) {
      s.meta.gone = true;
      this.gone++;
      return false;
    }
    if (this.streams.get(s.path) === s) this.streams.delete(s.path);
    // The parent loses a fork; a soft-deleted parent without forks goes too, and so on up the chain.
    for (let p = s.parent; p && --p.refs === 0 && p.meta.gone; p = p.parent) {
      if (this.streams.get(p.path) === p) this.streams.delete(p.path);
      this.gone--;
    }
    return true;
  }

  /** Sliding Stream-TTL: every access but HEAD renews it (Stream-Expires-At stays fixed). */
  private touch(s: MemoryStream): void {
    if (s.meta.ttlSeconds !== null) s.meta.expiresAtMs = Date.now() + s.meta.ttlSeconds * 1000;
  }

  /** Messages after `after` up to position `upTo`, the ancestors' first (a fork's stitched read). */
  private collect(
    s: MemoryStream,
    after: number,
    upTo: number,
    out: Buffer[],
    max: number,
    maxBytes: number,
    bytes = 0,
  ): number {
    if (after < s.forkPoint && s.parent) {
      bytes = this.collect(s.parent, after, Math.min(upTo, s.forkPoint), out, max, maxBytes, bytes);
      after = s.forkPoint;
    }
    // At least one entry per read, however large: a reader always makes progress.
    for (let pos = Math.max(after, s.forkPoint) + 1; pos <= upTo && out.length < max; pos++) {
      const e = s.entries[pos - s.forkPoint - 1]!;
      if (out.length > 0 && bytes + e.length > maxBytes) return Number.POSITIVE_INFINITY;
      out.push(e);
      bytes += e.length;
    }
    return bytes;
  }

  private sweep(): void {
    for (const path of [...this.streams.keys()]) this.live(path);
  }

  async create(
    path: string,
    config: StreamConfig,
    initial: Buffer[],
    fork?: ForkRequest,
    owner: string | null = null,
  ): Promise<CreateResult> {
    const existing = this.live(path);
    if (existing) {
      const m = existing.meta;
      if (m.gone) return { kind: 'gone' };
      const same = fork
        ? sameAsExisting(m, existing.spec, config, fork)
        : m.contentType === config.contentType &&
          m.ttlSeconds === config.ttlSeconds &&
          m.expiresAt === config.expiresAt &&
          m.closed === config.closed;
      return { kind: same ? 'exists' : 'conflict', meta: { ...m } };
    }
    let parent: MemoryStream | null = null;
    let forkPoint = 0;
    let own = [...initial];
    if (fork) {
      const source = this.live(fork.source);
      if (!source) return { kind: 'source_not_found' };
      if (source.meta.gone) return { kind: 'source_gone' };
      if (!fork.inheritContentType && config.contentType !== source.meta.contentType) {
        return { kind: 'source_type_mismatch' };
      }
      if (source.meta.aliases.length >= MAX_FORK_DEPTH) {
        return { kind: 'bad_fork', code: 'bad_request', message: TOO_DEEP };
      }
      const at = fork.offset
        ? resolveOffset(source.meta, fork.offset.epoch, fork.offset.position)
        : { position: source.meta.tail };
      if ('code' in at)
        return { kind: 'bad_fork', code: at.code, message: `Stream-Fork-Offset: ${at.message}` };
      const next: Buffer[] = [];
      this.collect(source, at.position, source.meta.tail, next, 1, Number.POSITIVE_INFINITY);
      const point = forkPointOf(
        at.position,
        fork.subOffset,
        source.meta.tail,
        source.meta.contentType === 'application/json',
        next[0],
      );
      if ('code' in point) return { kind: 'bad_fork', code: point.code, message: point.message };
      config = forkConfigOf(config, fork, source.meta);
      parent = source;
      forkPoint = point.forkPoint;
      if (point.prefix) own = [Buffer.from(point.prefix), ...own];
    }
    const perOwner = this.bounds.maxStreamsPerOwner;
    const ownerFull = (): boolean =>
      owner !== null && perOwner !== undefined && (this.owned.get(owner) ?? 0) >= perOwner;
    if (ownerFull() || this.streams.size - this.gone >= this.bounds.maxStreams) this.sweep();
    if (ownerFull()) return { kind: 'too_many_owner_streams' };
    if (this.streams.size - this.gone >= this.bounds.maxStreams) return { kind: 'too_many_streams' };
    const meta: StreamMeta = {
      contentType: config.contentType,
      ttlSeconds: config.ttlSeconds,
      expiresAt: config.expiresAt,
      expiresAtMs: expiryOf(config, Date.now()),
      closed: config.closed,
      epoch: this.generation++,
      tail: forkPoint + own.length,
      gone: false,
      aliases: parent ? forkAliases(parent.meta, forkPoint) : [],
    };
    if (parent) parent.refs++;
    if (owner !== null) this.owned.set(owner, (this.owned.get(owner) ?? 0) + 1);
    this.streams.set(path, {
      path,
      meta,
      entries: own,
      forkPoint,
      parent,
      refs: 0,
      spec: fork ? forkSpecOf(fork) : '',
      lastStreamSeq: null,
      producers: new Map(),
      closedBy: null,
      owner,
    });
    return { kind: 'created', meta: { ...meta } };
  }

  async append(path: string, input: AppendInput): Promise<AppendResult> {
    const s = this.live(path);
    if (!s) return { kind: 'not_found' };
    if (s.meta.gone) return { kind: 'gone' };
    this.touch(s);
    const meta = (): StreamMeta => ({ ...s.meta });
    const { producer } = input;
    if (s.meta.closed) {
      if (producer && s.closedBy === tupleOf(producer)) {
        return { kind: 'duplicate', meta: meta(), producer: { epoch: producer.epoch, seq: producer.seq } };
      }
      // Closing again, with nothing to append and no producer to check: already done.
      if (!producer && input.close && input.entries.length === 0) {
        return { kind: 'duplicate', meta: meta(), producer: null };
      }
      const state = producer ? s.producers.get(producer.id) : undefined;
      if (producer && state && producer.epoch < state.epoch) {
        return { kind: 'stale_producer_epoch', currentEpoch: state.epoch };
      }
      return { kind: 'closed', meta: meta() };
    }
    if (input.contentType !== null && input.contentType !== s.meta.contentType) {
      return { kind: 'content_type_mismatch', meta: meta() };
    }
    let next: ProducerState | null = null;
    if (producer) {
      const verdict = checkProducer(s.producers.get(producer.id), producer);
      if (verdict.kind === 'duplicate') {
        return {
          kind: 'duplicate',
          meta: meta(),
          producer: { epoch: verdict.state.epoch, seq: verdict.state.lastSeq },
        };
      }
      if (verdict.kind !== 'accept') return verdict;
      next = verdict.next;
    }
    if (input.streamSeq !== null && s.lastStreamSeq !== null && input.streamSeq <= s.lastStreamSeq) {
      return { kind: 'stream_seq_conflict', meta: meta() };
    }
    // Every check passed: only now is anything changed.
    if (input.streamSeq !== null) s.lastStreamSeq = input.streamSeq;
    if (producer && next) s.producers.set(producer.id, next);
    for (const e of input.entries) s.entries.push(e);
    s.meta.tail = s.forkPoint + s.entries.length;
    if (input.close) {
      s.meta.closed = true;
      s.closedBy = producer ? tupleOf(producer) : null;
    }
    this.waiters.wake(path);
    return {
      kind: 'appended',
      meta: meta(),
      producer: next ? { epoch: next.epoch, seq: next.lastSeq } : null,
    };
  }

  async read(path: string, after: number, maxEntries: number, maxBytes: number): Promise<ReadResult | null> {
    const s = this.live(path);
    if (!s) return null;
    if (s.meta.gone) return { meta: { ...s.meta }, entries: [] };
    this.touch(s);
    const tail = s.meta.tail;
    const last = s.lastPage;
    if (
      last &&
      last.after === after &&
      last.tail === tail &&
      last.maxEntries === maxEntries &&
      last.maxBytes === maxBytes
    )
      return { meta: { ...s.meta }, entries: last.entries };
    const entries: Buffer[] = [];
    this.collect(s, after, tail, entries, maxEntries, maxBytes);
    if (entries.length > 0) s.lastPage = { after, maxEntries, maxBytes, tail, entries };
    return { meta: { ...s.meta }, entries };
  }

  async head(path: string): Promise<StreamMeta | null> {
    const s = this.live(path);
    return s ? { ...s.meta } : null;
  }

  async delete(path: string): Promise<DeleteResult> {
    const s = this.live(path);
    if (!s) return 'not_found';
    if (s.meta.gone) return 'gone';
    this.drop(s);
    return 'deleted';
  }

  waitAfter(path: string, after: number, timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome> {
    return this.waiters.waitUntil(
      path,
      async () => {
        const s = this.live(path);
        return !s || s.meta.gone || s.meta.tail > after || s.meta.closed;
      },
      timeoutMs,
      signal,
    );
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.streams.clear();
    this.owned.clear();
  }
}
