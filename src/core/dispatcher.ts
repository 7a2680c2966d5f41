/**
 * One capsule's dispatcher, run only by the replica that owns the capsule's lease: it hands the
 * oldest queued submission to the capsule when the log shows the capsule free (no task running, no
 * hand-off in flight). At most once: the `submission-handed` fact is appended (fenced by the owner's
 * token: a replica that lost the lease cannot record one, so cannot send) and read back before the
 * message is sent. A hand-off a previous owner recorded whose task never appeared in the log is
 * settled `failed` (its outcome is unknown), never sent again.
 */
import type { Logger } from 'pino';
import type { FactEntry } from '../log/record.js';
import type { UpstreamPort, WriterPort } from './types.js';
import { capsuleClass, secondsBetween, type LatencyMetrics } from './latency.js';
import {
  contextOf,
  endSpan,
  SpanKind,
  startSpan,
  traceparentOf,
  tracingOn,
  withSpan,
  type Span,
} from '../tracing.js';

/** What the dispatcher reads of its capsule's queue (submission-queue.ts's CapsuleQueue). */
export interface QueueView {
  readonly fold: QueueFold;
  readonly isOpen: boolean;
  poll(): Promise<void>;
  changed(ms: number): Promise<void>;
  through(offset: number, timeoutMs: number): Promise<void>;
}
import { NO_TASKS, type HandedSubmission, type QueueFold, type QueuedSubmission } from './queue-fold.js';

export interface DispatchTuning {
  /** After (re)connecting, how long the capsule's replay may take to show a task an earlier hand-off started. */
  orphanGraceMs?: number;
  /** After the capsule refused a hand-off for now (busy, its queue full), try again this much later. */
  retryMs?: number;
  /** A capsule shown busy with no record for this long is probed (its task's final status may be lost). */
  staleBusyMs?: number;
  /**
   * While idle, how often the head of the log is read for admissions whose wake-up was lost
   * (default 1000). An admission wakes the dispatcher at once (SubmissionQueues.admitted, and across
   * replicas a publish through the store): this look only bounds what a lost signal costs.
   */
  idlePollMs?: number;
}

interface DispatcherOptions extends DispatchTuning {
  storeTimeoutMs: number;
  current: () => Promise<QueueFold>;
  logger?: Logger;
  latency?: LatencyMetrics;
}

export const ORPHAN_REASON =
  'outcome unknown: the gateway replica handing this message to the capsule stopped before it knew whether the capsule took it';

const QUEUE_SEND_FAILED = 'queue send failed';

export class Dispatcher {
  private stopped = false;
  /** Hand-offs this term made (an earlier term's, still in flight, are orphans). */
  private readonly mine = new Set<string>();
  private readonly canceled = new Set<string>();
  private retryAt = 0;
  private lastChange = Date.now();
  private lastThrough = 0;
  /**
   * Whether the capsule may be handed a message while a task runs. Its `lifecycle.task_acceptance`
   * is on no card or ack, so it is learned: `queue` takes the message into the capsule's own queue
   * (its order is ours: one hand-off at a time), `single` answers `rejected`. Until a `rejected`,
   * waiting for the running task's final status would leave a `queue` capsule idle behind a task
   * another client started, for as long as that task runs.
   */
  private takesWhileBusy = true;
  /** The session count of the fold when takesWhileBusy was last learned. */
  private session = -1;

  constructor(
    private readonly capsule: string,
    private readonly queue: QueueView,
    private readonly upstream: UpstreamPort,
    private readonly writer: WriterPort,
    private readonly options: DispatcherOptions,
  ) {}

  start(): void {
    const latency = this.options.latency;
    // The owner times its hand-offs' first frames (every replica folds the log; one observes).
    this.queue.fold.onFirstFrame = (h, frame) => {
      latency?.firstFrame.observe(this.labels(h), secondsBetween(h.receivedAt, frame.receivedAt));
      // Admission → the task's first frame in the log, in the admission's trace.
      if (h.trace && tracingOn()) {
        const span = startSpan('murmur.task.first_frame', {
          parent: contextOf(h.trace),
          startTime: h.receivedAt,
          attributes: {
            'murmur.capsule': this.capsule,
            'murmur.task_id': h.taskId ?? '',
            'murmur.offset': frame.offset,
          },
        });
        endSpan(span, undefined, Math.max(h.receivedAt, frame.receivedAt));
      }
    };
    void this.run().catch((err: unknown) => {
      this.options.logger?.error({ err, capsule: this.capsule }, 'dispatcher stopped on an error');
    });
  }

  stop(): void {
    this.stopped = true;
    this.queue.fold.onFirstFrame = null;
  }

  private labels(s: QueuedSubmission): { surface: string; capsule_class: string } {
    return { surface: s.surface, capsule_class: capsuleClass(this.upstream.state().connection?.release) };
  }

  private get fold(): QueueFold {
    return this.queue.fold;
  }

  private async run(): Promise<void> {
    await this.catchUp();
    await this.settleOrphans();
    while (!this.stopped) {
      this.cancelWithdrawn();
      const next = this.nextToSend();
      if (!next) {
        await this.queue.changed(this.waitMs());
        // An idle queue holds no subscription: an admission opens it (its wake-up), and a cheap
        // look at the head finds one whose wake-up was lost.
        if (!this.queue.isOpen) await this.queue.poll().catch(() => undefined);
        continue;
      }
      await this.handOver(next);
    }
  }

  private async catchUp(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.options.current();
        return;
      } catch (err) {
        this.options.logger?.warn({ err, capsule: this.capsule }, 'dispatcher: the log is unavailable');
        await this.queue.changed(1_000);
      }
    }
  }

  private connected(): boolean {
    return this.upstream.state().state === 'connected';
  }

  /** Hand-offs of an earlier owner still in flight: wait until the capsule's replay is in the log. */
  private async settleOrphans(): Promise<void> {
    const grace = this.options.orphanGraceMs ?? 3_000;
    while (!this.stopped && !this.connected()) await this.queue.changed(500);
    let until = Date.now() + grace;
    while (!this.stopped && Date.now() < until) {
      await this.queue.changed(until - Date.now());
      this.noteProgress();
      // An orphan a `queue` capsule may hold behind a running task starts once that task ends.
      if (this.orphans().length > 0 && this.takesWhileBusy && this.fold.running.size > 0 && this.fresh())
        until = Date.now() + grace;
    }
    if (this.stopped) return;
    await this.catchUp();
    for (const h of this.orphans()) await this.withdraw(h, 'failed', ORPHAN_REASON);
  }

  private orphans(): HandedSubmission[] {
    return [...this.fold.handed.values()].filter((h) => h.taskId === null && !this.mine.has(h.messageId));
  }

  private waitMs(): number {
    const poll = this.options.idlePollMs ?? 1_000;
    const retry = this.retryAt - Date.now();
    return Math.max(50, Math.min(poll, retry > 0 ? retry : poll));
  }

  private noteProgress(): void {
    const fold = this.fold;
    if (fold.through !== this.lastThrough) {
      this.lastThrough = fold.through;
      this.lastChange = Date.now();
    }
    // A restarted capsule may have restarted with another `task_acceptance`: learn it again.
    if (fold.sessions !== this.session) {
      this.session = fold.sessions;
      this.takesWhileBusy = true;
    }
  }

  /** The log has moved within staleBusyMs: a task it shows running is really running. */
  private fresh(): boolean {
    return Date.now() - this.lastChange <= (this.options.staleBusyMs ?? 30_000);
  }

  /** The oldest queued submission, when the capsule can take it now. */
  private nextToSend(): QueuedSubmission | null {
    this.noteProgress();
    const fold = this.fold;
    const first = fold.queue[0];
    if (!first || !this.connected() || Date.now() < this.retryAt) return null;
    if (fold.handed.size > 0) return null;
    // Not fresh: a running task whose final status the log may never get (frames lost); probe.
    if (fold.running.size > 0 && !this.takesWhileBusy && this.fresh()) return null;
    return first;
  }

  private cancelWithdrawn(): void {
    for (const h of this.fold.handed.values()) {
      if (!h.withdrawn || h.taskId === null || this.canceled.has(h.taskId)) continue;
      this.canceled.add(h.taskId);
      void this.upstream.cancel(h.taskId).catch(() => undefined);
    }
  }

  private async append(fact: FactEntry): Promise<number> {
    const at = await this.writer.append(this.capsule, fact);
    await this.queue.through(at.offset, this.options.storeTimeoutMs);
    return at.offset;
  }

  /**
   * Hand `next` over, in its admission's trace when it has one: its queue wait (admission to now),
   * then the hand-off span holding the fenced fact's store round trip and the `message/stream`.
   */
  private async handOver(next: QueuedSubmission): Promise<void> {
    if (!next.trace || !tracingOn()) return this.handOverNow(next, undefined);
    const parent = contextOf(next.trace);
    const attributes = {
      'murmur.capsule': this.capsule,
      'murmur.surface': next.surface,
      'murmur.message_id': next.messageId,
    };
    endSpan(startSpan('murmur.submission.queue_wait', { parent, attributes, startTime: next.receivedAt }));
    const span = startSpan('murmur.submission.handoff', { parent, attributes });
    try {
      await withSpan(span, () => this.handOverNow(next, span));
    } finally {
      endSpan(span);
    }
  }

  private async handOverNow(next: QueuedSubmission, span: Span | undefined): Promise<void> {
    let handedAt: number;
    try {
      this.mine.add(next.messageId);
      handedAt = await this.append({
        kind: 'fact',
        fact: 'submission-handed',
        messageId: next.messageId,
        contextId: next.contextId,
        receivedAt: Date.now(),
      });
    } catch (err) {
      // Fenced (another replica owns the capsule now: it continues) or the store is away.
      this.options.logger?.warn({ err, capsule: this.capsule }, 'dispatcher: hand-off not recorded');
      this.retryAt = Date.now() + 1_000;
      await this.queue.changed(1_000);
      return;
    }
    const handed = this.fold.handed.get(next.messageId);
    // Withdrawn before its hand-off was recorded (the log says so): it is never sent.
    if (!handed || handed.handedAt !== handedAt) return;
    if (handed.withdrawn) {
      // Aborted between its hand-off and the send: the capsule never sees it.
      await this.append({
        kind: 'fact',
        fact: 'submission-returned',
        messageId: handed.messageId,
        reason: 'withdrawn',
        receivedAt: Date.now(),
      }).catch(() => undefined);
      return;
    }
    // The capsule's `message/stream`, a client span whose context the capsule receives.
    const call = span
      ? startSpan('murmur.capsule.message_stream', {
          kind: SpanKind.CLIENT,
          attributes: { 'murmur.capsule': this.capsule, 'url.full': this.upstream.url },
        })
      : undefined;
    const traceparent = traceparentOf(call);
    const outcome = await this.upstream.submit({
      text: next.text,
      contextId: next.contextId,
      messageId: next.messageId,
      after: handedAt,
      ...(traceparent ? { traceparent } : {}),
    });
    call?.setAttribute('murmur.outcome', outcome.kind);
    if (outcome.kind === 'accepted') call?.setAttribute('murmur.task_id', outcome.taskId);
    endSpan(call, outcome.kind === 'unreachable' ? outcome.reason : undefined);
    span?.setAttribute('murmur.outcome', outcome.kind);
    switch (outcome.kind) {
      case 'accepted':
        this.options.latency?.handoff.observe(this.labels(next), secondsBetween(next.receivedAt, Date.now()));
        // Its first frame is (or soon will be) in the log; a withdrawal meanwhile cancels it.
        if (handed.withdrawn && !this.canceled.has(outcome.taskId)) {
          this.canceled.add(outcome.taskId);
          await this.upstream.cancel(outcome.taskId).catch(() => undefined);
        }
        handed.taskId ??= outcome.taskId;
        await this.append({
          kind: 'fact',
          fact: 'submission-started',
          messageId: handed.messageId,
          contextId: handed.contextId,
          taskId: outcome.taskId,
          // Each replica delivering the task's frames joins the hand-off's trace.
          ...(span ? { trace: traceparentOf(span) ?? undefined } : {}),
          receivedAt: Date.now(),
        }).catch(() => undefined);
        return;
      case 'rejected':
        // Only `single` rejects (`queue` queues, `none` has no message/stream): until its next
        // session, hand over only once the log shows the capsule free.
        this.takesWhileBusy = false;
        return this.giveBack(handed, 'capsule busy');
      case 'invalid':
        if (outcome.data.includes(QUEUE_SEND_FAILED)) return this.giveBack(handed, 'capsule queue full');
        return this.withdraw(handed, 'failed', 'capsule refused the message');
      case 'method-not-found':
        return this.withdraw(handed, 'failed', NO_TASKS);
      case 'unreachable':
        return this.afterUnreachable(handed, outcome.reason);
    }
  }

  /** The capsule did not take it for now: back to its place, tried again later. */
  private async giveBack(h: HandedSubmission, reason: string): Promise<void> {
    this.retryAt = Date.now() + (this.options.retryMs ?? 1_000);
    try {
      await this.append({
        kind: 'fact',
        fact: 'submission-returned',
        messageId: h.messageId,
        reason,
        receivedAt: Date.now(),
      });
    } catch (err) {
      this.options.logger?.warn({ err, capsule: this.capsule }, 'dispatcher: could not return a submission');
    }
  }

  /**
   * The send failed in a way that cannot tell whether the capsule took it: once the capsule is
   * watched again and its replay is in, the log decides (its task's frames, or it never ran).
   */
  private async afterUnreachable(h: HandedSubmission, reason: string): Promise<void> {
    while (!this.stopped && !this.connected()) await this.queue.changed(500);
    const grace = this.options.orphanGraceMs ?? 3_000;
    let until = Date.now() + grace;
    while (!this.stopped && h.taskId === null && Date.now() < until) {
      await this.queue.changed(until - Date.now());
      this.noteProgress();
      // A `queue` capsule holds it behind a task that still runs (the submit timed out waiting for
      // its start): it starts once that task ends, so the grace counts from then.
      if (this.takesWhileBusy && this.fold.running.size > 0 && this.fresh()) until = Date.now() + grace;
    }
    if (this.stopped || h.taskId !== null || !this.fold.handed.has(h.messageId)) return;
    await this.withdraw(h, 'failed', `capsule unreachable: ${reason}`);
  }

  private async withdraw(h: HandedSubmission, outcome: 'aborted' | 'failed', reason: string): Promise<void> {
    try {
      await this.append({
        kind: 'fact',
        fact: 'submission-withdrawn',
        messageId: h.messageId,
        contextId: h.contextId,
        outcome,
        reason,
        receivedAt: Date.now(),
      });
    } catch (err) {
      this.options.logger?.warn({ err, capsule: this.capsule }, 'dispatcher: could not settle a submission');
      this.retryAt = Date.now() + 1_000;
    }
  }
}
