/**
 * The submission queue of every capsule, read from the log: each replica folds a capsule's log
 * (queue-fold.ts) to answer admission bounds, queue depth and abort, and the capsule's owner runs its
 * dispatcher (dispatcher.ts). The queue is nothing but log records, so a restart or a failover
 * continues from the log, and the embedded store behaves the same within one process.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { FactEntry } from '../log/record.js';
import type { HubPort, UpstreamPort, WriterPort } from './types.js';
import { Dispatcher, type DispatchTuning } from './dispatcher.js';
import { QueueFold } from './queue-fold.js';
import type { LatencyMetrics } from './latency.js';
import type { Subscription } from './types.js';
import { withTimeout } from '../timeouts.js';

export interface QueueLimits {
  /** Queued submissions per capsule, all owners. */
  maxPerCapsule: number;
  /** Queued submissions per capsule of one owner. */
  maxPerOwner: number;
  /** What a refusal past a bound tells the client to wait (Retry-After, rounded up to seconds). */
  retryAfterMs: number;
}

const DEFAULT_QUEUE_LIMITS: QueueLimits = {
  maxPerCapsule: 1000,
  maxPerOwner: 100,
  retryAfterMs: 2000,
};

export interface SubmissionQueuesDeps {
  hub: Pick<HubPort, 'subscribe' | 'position' | 'read'>;
  writer: WriterPort;
  upstreams: Map<string, UpstreamPort>;
  limits?: Partial<QueueLimits>;
  /** How long a read of the queue may wait for the store before it is `store_unavailable`. */
  storeTimeoutMs: number;
  logger?: Logger;
  dispatch?: DispatchTuning;
  /**
   * Tell the other replicas a submission was admitted (a publish through the store): the capsule's
   * owner wakes its dispatcher. Best effort: a lost signal costs the owner's idle poll, no more.
   */
  announce?: (capsule: string, offset: number) => void;
  /** Hand-off and time-to-first-frame histograms (observed by the owner's dispatchers). */
  latency?: LatencyMetrics;
}

/**
 * A hub subscription keeps a store reader per capsule (a blocking XREAD on its own connection) and
 * the capsule's recent records in memory: an idle queue holds none (the hub lingers on its own).
 * Idle: nothing queued, and every hand-off has started its task, its first frame folded (its end
 * matters only to a next one).
 */
const idle = (fold: QueueFold): boolean => {
  if (fold.queue.length > 0) return false;
  // A hand-off whose task's first frame is not folded yet keeps it open (the time to first frame).
  for (const h of fold.handed.values()) if (h.taskId === null || h.withdrawn || !h.firstFrame) return false;
  return true;
};

/**
 * One capsule's fold, kept current by a subscription from the start of the log while the queue has
 * something in it; closed when idle, it resumes from the last folded offset (nothing skipped).
 */
export class CapsuleQueue {
  readonly fold = new QueueFold();
  private readonly waiters = new Set<() => void>();
  private sub: Subscription | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  /**
   * The offset a caller opened the subscription to fold (the head it saw): until the fold reaches
   * it, an empty-looking fold is only one that has not read its records yet, so it stays open. A
   * subscription delivers its first records a store read or two after it opens; closing it as idle
   * before then (a 0 ms timer wins that race on a busy process) drops them, and its caller, opening
   * it again, meets the same race: the fold could stand still for seconds.
   */
  private mustReach = 0;

  constructor(
    private readonly capsule: string,
    private readonly hub: SubmissionQueuesDeps['hub'],
    private readonly logger: Logger | undefined,
  ) {}

  /** Fold the log from the last folded offset, at least through `reach` before closing when idle. */
  open(reach = 0): void {
    this.mustReach = Math.max(this.mustReach, reach);
    if (this.sub) return;
    this.sub = this.hub.subscribe(this.capsule, {
      after: this.fold.through,
      onRecords: (records) => {
        for (const r of records) this.fold.apply(r);
        this.closeWhenIdle();
        this.notify();
      },
      // Resumed from the last folded offset: nothing is folded twice, nothing skipped.
      onEnd: (reason) => {
        this.sub = null;
        this.notify();
        if (reason !== 'closed' && reason !== 'shutdown') {
          this.logger?.warn(
            { capsule: this.capsule, reason },
            'submission queue: log subscription ended, resuming',
          );
          setTimeout(() => this.open(), 200).unref();
        }
      },
    });
  }

  get isOpen(): boolean {
    return this.sub !== null;
  }

  private closable(): boolean {
    return idle(this.fold) && this.fold.through >= this.mustReach;
  }

  private closeWhenIdle(): void {
    if (!this.closable()) {
      if (this.idleTimer) clearTimeout(this.idleTimer);
      this.idleTimer = null;
      return;
    }
    // Not from inside the subscription's own callback; checked again, as a caller may have asked
    // for more meanwhile.
    this.idleTimer ??= setTimeout(() => {
      this.idleTimer = null;
      if (this.closable()) this.close();
    }, 0);
    this.idleTimer.unref();
  }

  /** Closed: reopen when the log moved on (a submission admitted through another replica). */
  async poll(): Promise<void> {
    if (this.sub) return;
    const position = await this.hub.position(this.capsule);
    if (position.head > this.fold.through) this.open(position.head);
  }

  close(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    this.sub?.close();
    this.sub = null;
    this.notify();
  }

  /** Resolves on the next fold change (or subscription end), or after `ms`. */
  changed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  /** Resolves once every record up to `offset` is folded (rejects past `timeoutMs`). */
  async through(offset: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.fold.through < offset) {
      // A head with no record after what was folded (a store that lost its counter reports a new
      // epoch's head before anything is appended in it) is reached already: no record will come.
      if ((await this.hub.read(this.capsule, this.fold.through, 1)).records.length === 0) {
        // Nothing to wait for: an idle fold may close again.
        this.mustReach = Math.min(this.mustReach, this.fold.through);
        this.closeWhenIdle();
        return;
      }
      if (this.fold.through >= offset) return;
      this.open(offset);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new GatewayError('store_unavailable', 'the submission queue could not be read in time');
      await this.changed(Math.min(left, 1_000));
    }
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }
}

export class SubmissionQueues {
  readonly limits: QueueLimits;
  private readonly queues = new Map<string, CapsuleQueue>();
  private readonly dispatchers = new Map<string, Dispatcher>();

  constructor(private readonly deps: SubmissionQueuesDeps) {
    this.limits = { ...DEFAULT_QUEUE_LIMITS, ...deps.limits };
  }

  /** The capsule's queue; its fold is opened by whoever needs it current (through, poll). */
  private queue(capsule: string): CapsuleQueue {
    let q = this.queues.get(capsule);
    if (!q) {
      q = new CapsuleQueue(capsule, this.deps.hub, this.deps.logger);
      this.queues.set(capsule, q);
    }
    return q;
  }

  /** The capsule's fold, caught up to the head as of the call (writes of other replicas included). */
  async current(capsule: string): Promise<QueueFold> {
    const q = this.queue(capsule);
    const timeoutMs = this.deps.storeTimeoutMs;
    const position = await withTimeout(this.deps.hub.position(capsule), timeoutMs, () => {
      throw new GatewayError('store_unavailable', 'the log store did not answer in time');
    });
    await q.through(position.head, timeoutMs);
    return q.fold;
  }

  /** Refuses (429 on every surface) when one more submission would pass a bound. */
  checkRoom(fold: QueueFold, owner: string | null): void {
    const { maxPerCapsule, maxPerOwner } = this.limits;
    const retryAfterSeconds = Math.max(1, Math.ceil(this.limits.retryAfterMs / 1000));
    if (fold.depth() >= maxPerCapsule)
      throw new GatewayError('queue_full', 'the capsule has too many queued submissions', {
        retryAfterSeconds,
        bound: 'capsule',
      });
    if (owner !== null && fold.depthOf(owner) >= maxPerOwner)
      throw new GatewayError('queue_full', 'this owner has too many queued submissions', {
        retryAfterSeconds,
        bound: 'owner',
      });
  }

  /**
   * Withdraw every queued and running submission of a context (Flue abort, BeeOS cancel/DELETE):
   * the queued ones never reach the capsule, a running one's task is canceled by the dispatcher.
   * Returns how many were withdrawn.
   */
  async withdrawContext(
    capsule: string,
    contextId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<number> {
    const fold = await this.current(capsule);
    const ids = fold.ofContext(contextId);
    await this.withdraw(capsule, ids, contextId, outcome, reason);
    return ids.length;
  }

  /**
   * Withdraw one queued or running submission (an A2A task canceled by its id): the context's other
   * submissions stay where they are. False when it is not in the queue (ended, or never queued).
   */
  async withdrawSubmission(
    capsule: string,
    submissionId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<boolean> {
    const fold = await this.current(capsule);
    const found = fold.pending(submissionId);
    if (!found) return false;
    await this.withdraw(capsule, [submissionId], found.contextId, outcome, reason);
    return true;
  }

  private async withdraw(
    capsule: string,
    ids: string[],
    contextId: string,
    outcome: 'aborted' | 'failed',
    reason: string,
  ): Promise<void> {
    const receivedAt = Date.now();
    await Promise.all(
      ids.map((messageId) => {
        const fact: FactEntry = {
          kind: 'fact',
          fact: 'submission-withdrawn',
          messageId,
          contextId,
          outcome,
          reason,
          receivedAt,
        };
        return this.deps.writer.append(capsule, fact);
      }),
    );
  }

  /**
   * Depth and oldest wait, from what this replica has folded (no store round trip). The owner always
   * folds its capsules; another replica only those it admitted to or aborted on (a status read does
   * not start a fold of the whole log).
   */
  stats(capsule: string, now = Date.now()): { depth: number; oldestMs: number } {
    const fold = this.queues.get(capsule)?.fold;
    if (!fold) return { depth: 0, oldestMs: 0 };
    return { depth: fold.depth(), oldestMs: fold.oldestMs(now) };
  }

  /**
   * A submission was admitted at `offset` through this replica: the capsule's dispatcher wakes now
   * rather than at its next idle poll. Here when this replica owns the capsule, else through the
   * store to the owner. Only a signal: the dispatcher still reads the admission from the log. This
   * replica's fold (closed when it was idle, as it was when the admission read it) folds through the
   * record either way, so its queue depth counts the submission at once.
   */
  admitted(capsule: string, offset: number): void {
    this.queue(capsule).open(offset);
    if (!this.dispatchers.has(capsule)) this.deps.announce?.(capsule, offset);
  }

  /** Another replica admitted a submission at `offset`: the owner folds through it (its dispatcher wakes). */
  wake(capsule: string, offset: number): void {
    if (!this.dispatchers.has(capsule)) return;
    this.queue(capsule).open(offset);
  }

  /** This replica owns the capsule now: hand its queue over (fenced by the writer's lane). */
  startDispatch(capsule: string): void {
    const upstream = this.deps.upstreams.get(capsule);
    if (!upstream) return;
    this.dispatchers.get(capsule)?.stop();
    const d = new Dispatcher(capsule, this.queue(capsule), upstream, this.deps.writer, {
      storeTimeoutMs: this.deps.storeTimeoutMs,
      current: () => this.current(capsule),
      ...(this.deps.logger ? { logger: this.deps.logger } : {}),
      ...(this.deps.latency ? { latency: this.deps.latency } : {}),
      ...this.deps.dispatch,
    });
    this.dispatchers.set(capsule, d);
    d.start();
  }

  stopDispatch(capsule: string): void {
    this.dispatchers.get(capsule)?.stop();
    this.dispatchers.delete(capsule);
  }

  close(): void {
    for (const d of this.dispatchers.values()) d.stop();
    this.dispatchers.clear();
    for (const q of this.queues.values()) q.close();
  }
}
