/** Shared helpers for the hub tests: entries, collecting subscribers, and store wrappers. */
import type { LogEntry, LogRecord } from '../../src/log/record.js';
import type { AppendResult, LogPosition, LogStore, ReadResult } from '../../src/log/store.js';
import type { SubscriptionEnd, Subscription } from '../../src/core/types.js';
import type { HubReadSide } from '../../src/hub/hub.js';

export const frame = (n: number): LogEntry => ({
  kind: 'frame',
  event: 'text',
  upstreamId: String(n),
  data: JSON.stringify({ id: 't1', text: `chunk ${n}` }),
  receivedAt: Date.now(),
});

export const frames = (from: number, count: number): LogEntry[] =>
  Array.from({ length: count }, (_, i) => frame(from + i));

/** Append `total` frames in batches of `batch`, awaiting each append (a bounded load generator). */
export const appendInBatches = async (
  store: LogStore,
  capsule: string,
  total: number,
  batch: number,
): Promise<void> => {
  for (let done = 0; done < total; done += batch) {
    await store.append(capsule, frames(done, Math.min(batch, total - done)));
    await new Promise((resolve) => setImmediate(resolve));
  }
};

export interface Collector {
  records: LogRecord[];
  batches: (readonly LogRecord[])[];
  ended: Promise<SubscriptionEnd>;
  endReason: SubscriptionEnd | null;
  /** Resolves once a record with offset >= `offset` was delivered; rejects if the subscription ends first. */
  until(offset: number): Promise<void>;
  sub: Subscription;
}

export interface CollectOptions {
  after?: number;
  maxQueuedRecords?: number;
  signal?: AbortSignal;
  /** Called per batch; its promise is returned from onRecords (an async writer). */
  onBatch?: (records: readonly LogRecord[]) => void | Promise<void>;
}

/** Subscribe and record everything delivered, checking that deliveries never overlap. */
export const collect = (hub: HubReadSide, capsule: string, options: CollectOptions = {}): Collector => {
  let endResolve: (reason: SubscriptionEnd) => void = () => undefined;
  const ended = new Promise<SubscriptionEnd>((resolve) => (endResolve = resolve));
  const waiters: { offset: number; resolve: () => void; reject: (err: Error) => void }[] = [];
  let inFlight = false;
  const collector: Collector = {
    records: [],
    batches: [],
    ended,
    endReason: null,
    until: (offset) =>
      new Promise<void>((resolve, reject) => {
        const last = collector.records[collector.records.length - 1];
        if (last && last.offset >= offset) resolve();
        else if (collector.endReason) reject(endedBefore(collector, offset));
        else waiters.push({ offset, resolve, reject });
      }),
    sub: { close: () => undefined },
  };
  collector.sub = hub.subscribe(capsule, {
    after: options.after ?? 0,
    maxQueuedRecords: options.maxQueuedRecords,
    signal: options.signal,
    onRecords: (records) => {
      if (inFlight) throw new Error('onRecords called concurrently');
      collector.batches.push(records);
      collector.records.push(...records);
      const last = records[records.length - 1]?.offset ?? 0;
      for (const w of waiters.filter((x) => x.offset <= last)) w.resolve();
      const result = options.onBatch?.(records);
      if (!result) return;
      inFlight = true;
      return result.finally(() => (inFlight = false));
    },
    onEnd: (reason) => {
      collector.endReason = reason;
      // A wait for an offset that can no longer come fails at once and says why, instead of hanging.
      for (const w of waiters.splice(0)) w.reject(endedBefore(collector, w.offset));
      endResolve(reason);
    },
  });
  return collector;
};

const endedBefore = (collector: Collector, offset: number): Error =>
  new Error(
    `subscription ended (${collector.endReason}) before offset ${offset}; last delivered: ` +
      `${collector.records[collector.records.length - 1]?.offset ?? 'none'}`,
  );

export const offsetsOf = (records: readonly LogRecord[]): number[] => records.map((r) => r.offset);

/** A promise and its resolver, to hold an async onRecords open until the test says so. */
export const gate = (): { promise: Promise<void>; open: () => void } => {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
};

/**
 * A store that delegates to another, counts concurrent tail waits per capsule, can fail reads, and can
 * "lose the log": swap to a fresh inner store under a new epoch (what a flushed Redis looks like).
 */
/**
 * Added to the epoch per lost log. Memory epochs are creation times in µs, so a small bump could equal
 * the gap between two stores' epochs; 10^12 µs (11 days) cannot, and keeps epochs below 10^16.
 */
const EPOCH_BUMP = 1e12;

export class WrappedStore implements LogStore {
  readonly kind = 'memory' as const;
  inFlightWaits = new Map<string, number>();
  maxConcurrentWaits = 0;
  waitCalls = 0;
  failReads = false;
  reads = 0;
  private epochBump = 0;

  constructor(
    private inner: LogStore,
    private readonly makeInner?: () => LogStore,
  ) {}

  /** Replace the log with an empty one under a new epoch. */
  loseLog(): void {
    if (!this.makeInner) throw new Error('no factory');
    this.inner = this.makeInner();
    this.epochBump++;
  }

  /** Results carry the epoch of the inner store the call went to, as a real store's would. */
  private at(bump: number, position: LogPosition): LogPosition {
    return { ...position, epoch: position.epoch + bump * EPOCH_BUMP };
  }

  async append(capsule: string, entries: LogEntry[]): Promise<AppendResult> {
    const { inner, epochBump } = this;
    const result = await inner.append(capsule, entries);
    return { ...result, epoch: result.epoch + epochBump * EPOCH_BUMP };
  }

  async read(capsule: string, after: number, limit: number): Promise<ReadResult> {
    if (this.failReads) throw new Error('store down');
    const { inner, epochBump } = this;
    const result = await inner.read(capsule, after, limit);
    this.reads++;
    return { ...result, position: this.at(epochBump, result.position) };
  }

  readLast(capsule: string, count: number): Promise<LogRecord[]> {
    return this.inner.readLast(capsule, count);
  }

  async position(capsule: string): Promise<LogPosition> {
    const { inner, epochBump } = this;
    return this.at(epochBump, await inner.position(capsule));
  }

  possiblyMissing(capsule: string): Promise<number> {
    return this.inner.possiblyMissing(capsule);
  }

  async waitAfter(
    capsule: string,
    after: number,
    limit: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<ReadResult> {
    this.waitCalls++;
    const n = (this.inFlightWaits.get(capsule) ?? 0) + 1;
    this.inFlightWaits.set(capsule, n);
    this.maxConcurrentWaits = Math.max(this.maxConcurrentWaits, n);
    const { inner, epochBump } = this;
    try {
      const result = await inner.waitAfter(capsule, after, limit, timeoutMs, signal);
      return { ...result, position: this.at(epochBump, result.position) };
    } finally {
      this.inFlightWaits.set(capsule, (this.inFlightWaits.get(capsule) ?? 1) - 1);
    }
  }

  trim(capsule: string): Promise<void> {
    return this.inner.trim(capsule);
  }

  ping(): Promise<boolean> {
    return this.inner.ping();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
