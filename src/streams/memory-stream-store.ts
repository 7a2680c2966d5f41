/**
 * The embedded store of general streams: zero setup, nothing survives a restart (like the embedded
 * capsule log). Each call runs to completion on the event loop, so every append, with its producer
 * state and Stream-Seq, is atomic by construction. Epochs come from one process-wide counter, so a
 * stream deleted and created again never reuses an offset.
 */
import { checkProducer, type ProducerState } from './producer-check.js';
import { StreamWaiters } from './waiters.js';
import type {
  AppendInput,
  AppendResult,
  CreateResult,
  ReadResult,
  StreamBounds,
  StreamConfig,
  StreamMeta,
  StreamStore,
  WaitOutcome,
} from './types.js';

interface MemoryStream {
  meta: StreamMeta;
  entries: Buffer[];
  lastStreamSeq: string | null;
  producers: Map<string, ProducerState>;
  /** The producer tuple whose batch closed the stream: its retry is a duplicate, not a 409. */
  closedBy: string | null;
}

const SWEEP_MS = 60_000;

const tupleOf = (p: { id: string; epoch: number; seq: number }): string => `${p.id}\n${p.epoch}\n${p.seq}`;

export const expiryOf = (config: StreamConfig, nowMs: number): number | null =>
  config.ttlSeconds !== null
    ? nowMs + config.ttlSeconds * 1000
    : config.expiresAt !== null
      ? Date.parse(config.expiresAt)
      : null;

export class MemoryStreamStore implements StreamStore {
  private readonly streams = new Map<string, MemoryStream>();
  private readonly waiters = new StreamWaiters();
  private generation = 0;
  /** Expired streams nobody touches are dropped this often (memory, not correctness: access checks expiry). */
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly bounds: StreamBounds) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** The live stream at `path`; an expired one is removed here (expiry is checked on access). */
  private live(path: string): MemoryStream | undefined {
    const s = this.streams.get(path);
    if (s && s.meta.expiresAtMs !== null && s.meta.expiresAtMs <= Date.now()) {
      this.streams.delete(path);
      this.waiters.wake(path);
      return undefined;
    }
    return s;
  }

  private sweep(): void {
    for (const path of [...this.streams.keys()]) this.live(path);
  }

  async create(path: string, config: StreamConfig, initial: Buffer[]): Promise<CreateResult> {
    const existing = this.live(path);
    if (existing) {
      const m = existing.meta;
      const same =
        m.contentType === config.contentType &&
        m.ttlSeconds === config.ttlSeconds &&
        m.expiresAt === config.expiresAt &&
        m.closed === config.closed;
      return { kind: same ? 'exists' : 'conflict', meta: { ...m } };
    }
    if (this.streams.size >= this.bounds.maxStreams) this.sweep();
    if (this.streams.size >= this.bounds.maxStreams) return { kind: 'too_many_streams' };
    const meta: StreamMeta = {
      contentType: config.contentType,
      ttlSeconds: config.ttlSeconds,
      expiresAt: config.expiresAt,
      expiresAtMs: expiryOf(config, Date.now()),
      closed: config.closed,
      epoch: this.generation++,
      tail: initial.length,
    };
    this.streams.set(path, {
      meta,
      entries: [...initial],
      lastStreamSeq: null,
      producers: new Map(),
      closedBy: null,
    });
    return { kind: 'created', meta: { ...meta } };
  }

  async append(path: string, input: AppendInput): Promise<AppendResult> {
    const s = this.live(path);
    if (!s) return { kind: 'not_found' };
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
    s.meta.tail = s.entries.length;
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
    const entries: Buffer[] = [];
    let bytes = 0;
    // At least one entry per read, however large: a reader always makes progress.
    for (let i = after; i < s.entries.length && entries.length < maxEntries; i++) {
      const e = s.entries[i]!;
      if (entries.length > 0 && bytes + e.length > maxBytes) break;
      entries.push(e);
      bytes += e.length;
    }
    return { meta: { ...s.meta }, entries };
  }

  async head(path: string): Promise<StreamMeta | null> {
    const s = this.live(path);
    return s ? { ...s.meta } : null;
  }

  async delete(path: string): Promise<boolean> {
    const existed = this.live(path) !== undefined;
    this.streams.delete(path);
    this.waiters.wake(path);
    return existed;
  }

  waitAfter(path: string, after: number, timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome> {
    return this.waiters.waitUntil(
      path,
      async () => {
        const s = this.live(path);
        return !s || s.meta.tail > after || s.meta.closed;
      },
      timeoutMs,
      signal,
    );
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.streams.clear();
  }
}
