/**
 * The LogWriter's send loop: one batch in flight per capsule, so a capsule's entries reach the
 * store in arrival order; a failed batch is retried with a capped, jittered backoff, as is (same
 * BatchId, so the store's dedup makes it idempotent) once it may have reached the store; the store's
 * answer settles the batch, or starts a new epoch, or ends this replica's term (`epoch-and-fence.ts`).
 */
import type { Logger } from 'pino';
import { takeBatch } from './batch-forming.js';
import { lingerFor, noteSent } from './batch-linger.js';
import { afterFenced, afterStoreReset } from './epoch-and-fence.js';
import { withdrawnError, type LaneRoom } from './lane-room.js';
import { fenced, notSent, type AppendResult, type LogStore } from './store.js';
import type { Batch, Lane, Pending } from './writer-lane.js';
import type { WriterSettings } from './writer-options.js';
import { endSpan, SpanKind, startSpan, trace, tracingOn, type Span } from '../tracing.js';

export interface SenderDeps {
  store: LogStore;
  writerId: string;
  settings: WriterSettings;
  room: LaneRoom;
  closed: () => boolean;
  resetListeners: Iterable<(capsule: string) => void>;
  fencedListeners: Iterable<(capsule: string, fence: number) => void>;
  /** Wake flush() callers whose capsules are now idle. */
  settleIdle: () => void;
  logger: Logger | undefined;
}

/**
 * One store round trip of a batch holding a traced entry: a child of the first such entry's span
 * (its admission, its hand-off), linked from the others'. Batches of frames alone make none.
 */
const roundTripSpan = (capsule: string, batch: Batch): Span | undefined => {
  const traced = batch.items.filter((p) => p.trace !== undefined);
  const first = traced[0];
  if (!first) return undefined;
  const span = startSpan('murmur.store.append', {
    parent: first.trace!,
    kind: SpanKind.CLIENT,
    attributes: { 'murmur.capsule': capsule, 'murmur.entries': batch.items.length },
  });
  for (const p of traced.slice(1)) {
    const sc = trace.getSpanContext(p.trace!);
    if (sc) span?.addLink({ context: sc });
  }
  return span;
};

export class BatchSender {
  private seq = 0;

  constructor(private readonly deps: SenderDeps) {}

  /** The entry's signal aborted: withdraw it if it has certainly not been sent, else let it settle. */
  withdraw(lane: Lane, p: Pending): void {
    const batch = p.batch;
    if (p.withdrawn || (batch && (batch.maybeSent || batch.attempting))) return; // settles by the store
    p.withdrawn = true;
    if (batch) batch.items = batch.items.filter((item) => item !== p);
    this.deps.room.settle(lane, p, null, withdrawnError());
    if (batch && batch.items.length === 0 && lane.inFlight === batch) {
      lane.abandon();
      this.sendNext(lane);
    }
    this.deps.settleIdle();
  }

  schedule(lane: Lane): void {
    if (lane.busy || lane.waitingCount === 0) return;
    // A microtask later: everything appended in the same synchronous run joins one batch.
    lane.scheduleOnce(() => this.sendNext(lane));
  }

  /** Send the lane's next batch if it may go now (`force`: without a busy capsule's linger). */
  sendNext(lane: Lane, force = false): void {
    if (this.deps.closed() || lane.busy) return;
    const { batch: bounds, linger } = this.deps.settings;
    const at = performance.now();
    const wait =
      force || lane.waitingCount === 0
        ? 0
        : lingerFor(lane.linger, lane.waitingCount, linger, bounds.maxBatch, at);
    if (wait > 0) return lane.lingerThen(wait, () => this.sendNext(lane));
    const batch = takeBatch(lane, bounds, () => ({ writerId: this.deps.writerId, seq: ++this.seq }));
    if (!batch) return;
    noteSent(lane.linger, batch.items.length, at);
    lane.begin(batch);
    this.attempt(lane);
  }

  /** Send a lingering batch now (a flush() caller waits for it). */
  cutLinger(lane: Lane): void {
    if (lane.cutLinger()) this.sendNext(lane, true);
  }

  /**
   * Send the in-flight batch. After a failure that certainly never reached the store, entries
   * withdrawn meanwhile leave it; after an ambiguous one it is retried as is (same BatchId).
   */
  private attempt(lane: Lane): void {
    const batch = lane.inFlight;
    if (!batch || this.deps.closed()) return;
    batch.attempting = true;
    const entries = batch.items.map((p) => p.entry);
    const options = { batch: batch.id, floor: lane.floor, resetFact: batch.resetFact, fence: batch.fence };
    const span = tracingOn() ? roundTripSpan(lane.capsule, batch) : undefined;
    this.deps.store.append(lane.capsule, entries, options).then(
      (result) => {
        endSpan(span);
        batch.attempting = false;
        if (lane.inFlight !== batch) return; // closed meanwhile
        if (lane.lastError)
          this.deps.logger?.info({ capsule: lane.capsule, failures: lane.attempt }, 'log store back');
        lane.landed();
        if (result.reset) this.onStoreReset(lane, batch, result);
        else this.resolveBatch(lane, batch, result);
        this.sendNext(lane);
        this.deps.settleIdle();
      },
      (err: unknown) => {
        endSpan(span, err);
        batch.attempting = false;
        if (lane.inFlight !== batch || this.deps.closed()) return;
        if (fenced(err) && batch.fence !== undefined) return this.onFencedBatch(lane, batch, batch.fence);
        if (!notSent(err)) batch.maybeSent = true;
        const attempt = lane.failed(err instanceof Error ? err.message : String(err));
        const log = attempt === 1 ? this.deps.logger?.warn : this.deps.logger?.debug;
        log?.call(
          this.deps.logger,
          { capsule: lane.capsule, err: lane.lastError, queued: lane.count },
          'log append failed; retrying',
        );
        // Re-form a batch the store never saw: entries whose signal aborted meanwhile leave it.
        if (!batch.maybeSent) {
          for (const p of batch.items) if (p.signal?.aborted) p.onAbort?.();
          if (lane.inFlight !== batch) return; // emptied: withdraw() moved on
        }
        const { retryBaseMs, retryMaxMs } = this.deps.settings;
        const exp = Math.min(retryMaxMs, retryBaseMs * 2 ** (attempt - 1));
        lane.retryAfter(exp / 2 + (Math.random() * exp) / 2, () => this.attempt(lane));
      },
    );
  }

  private resolveBatch(lane: Lane, batch: Batch, result: AppendResult): void {
    const offsets = result.offsets.length > 0 ? result.offsets : (result.appliedOffsets ?? []);
    if (offsets.length !== batch.items.length) {
      this.deps.logger?.error(
        { capsule: lane.capsule, expected: batch.items.length, got: offsets.length },
        'store returned an unexpected number of offsets',
      );
    }
    lane.raiseFloor(offsets[offsets.length - 1] ?? 0);
    batch.items.forEach((p, i) =>
      this.deps.room.settle(lane, p, { offset: offsets[i] ?? 0, epoch: result.epoch }),
    );
  }

  private onStoreReset(lane: Lane, batch: Batch, result: AppendResult): void {
    afterStoreReset(lane, batch, result, this.deps.room, this.deps.resetListeners, this.deps.logger);
  }

  private onFencedBatch(lane: Lane, batch: Batch, fence: number): void {
    lane.refused();
    afterFenced(lane, batch, fence, this.deps.room, this.deps.fencedListeners, this.deps.logger);
    this.sendNext(lane);
    this.deps.settleIdle();
  }
}
