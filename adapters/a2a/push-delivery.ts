/**
 * Push notification deliveries (spec §4.3.3), driven from the log: for every config of every task
 * in the task-webhook store whose capsule this replica owns, one worker folds the task
 * (projection.ts, as the streaming methods do) and POSTs each status and artifact update after the
 * config's cursor, in log order, one at a time; a 2xx moves the cursor in the store, anything else
 * is retried after a backoff (1 s doubling to 60 s, ±20 %), so nothing is skipped. Only the
 * capsule's owner delivers; a replica that takes a capsule over (a failover) finds its tasks at its
 * next sweep and continues from the stored cursors: an event whose acknowledgement was not stored
 * yet is sent again (at least once), none is left out. Receivers dedupe by `X-A2A-Event-Id`.
 */
import type { Logger } from 'pino';
import type { GatewayCore } from '../../src/core/types.js';
import type { A2aPushDeps } from '../../src/http/adapter-deps.js';
import { postWebhook } from '../../src/webhooks/delivery.js';
import { retryDelayMs } from '../../src/webhooks/retry.js';
import { capsuleOfKey, type TaskWebhook, type TaskWebhooksDoc } from '../../src/webhooks/task-webhooks.js';
import { Renderer, type Dialect } from './dialect.js';
import { TaskProjector, type TaskEvent } from './projection.js';
import { catchUp } from './task-reader.js';

/** The header naming the event a delivery carries (its record's log offset, as the SSE `id:`). */
export const EVENT_ID_HEADER = 'x-a2a-event-id';
/** A quiet task's worker looks again at its config and at ownership at least this often. */
const WAIT_MS = 5_000;
/** A task whose submission never reached the log (the send failed after its config was stored). */
const ORPHAN_MS = 60_000;
const MAX_CAS_TRIES = 20;

/** The worker stops: the gateway closes, the capsule moved to another replica, the config went. */
class Stopped extends Error {}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/** What a delivery of one event to `hook` carries besides the event (A2A §4.3.3, the SDK's token header). */
const headersOf = (hook: TaskWebhook, offset: number): Record<string, string> => ({
  'content-type': hook.wire === '1.0' ? 'application/a2a+json' : 'application/json',
  [EVENT_ID_HEADER]: String(offset),
  ...(hook.token !== null ? { 'x-a2a-notification-token': hook.token } : {}),
  ...(hook.authentication
    ? {
        authorization: `${hook.authentication.scheme} ${hook.authentication.credentials}`.trim(),
      }
    : {}),
});

export class PushDelivery {
  /** Workers running here, by task key and config id. */
  private readonly running = new Set<string>();
  private readonly stopping = new AbortController();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly core: GatewayCore,
    private readonly deps: A2aPushDeps,
    private readonly logger: Logger,
  ) {}

  /** Sweeps every `sweepMs` (the first after one period: the store may still be connecting) until the gateway drains. */
  start(): void {
    const stop = (): void => this.close();
    if (this.core.shutdownSignal.aborted) return;
    this.core.shutdownSignal.addEventListener('abort', stop, { once: true });
    const tick = (): void => {
      if (this.stopping.signal.aborted) return;
      void this.sweep()
        .catch((err: unknown) => this.logger.warn({ err: String(err) }, 'a2a push: sweep failed'))
        .finally(() => {
          if (this.stopping.signal.aborted) return;
          this.timer = setTimeout(tick, this.deps.sweepMs);
          this.timer.unref();
        });
    };
    this.timer = setTimeout(tick, this.deps.sweepMs);
    this.timer.unref();
  }

  close(): void {
    this.stopping.abort();
    if (this.timer) clearTimeout(this.timer);
  }

  /** Every task of a capsule this replica owns gets its workers (a takeover continues here). */
  async sweep(): Promise<void> {
    for (const key of await this.deps.store.keys())
      if (this.deps.owns(capsuleOfKey(key))) await this.kick(key);
  }

  /** Starts the workers of the task's configs that have none here (only on the capsule's owner). */
  async kick(key: string): Promise<void> {
    if (this.stopping.signal.aborted || !this.deps.owns(capsuleOfKey(key))) return;
    const found = await this.deps.store.get(key);
    for (const hook of found?.doc.webhooks ?? []) if (!hook.done) this.spawn(key, hook.id);
  }

  private spawn(key: string, hookId: string): void {
    const worker = `${key}\n${hookId}`;
    if (this.running.has(worker)) return;
    this.running.add(worker);
    void this.run(key, hookId)
      .catch((err: unknown) => {
        // Closing cuts workers mid-call (the store may be closing too): that is no failure.
        if (!(err instanceof Stopped) && !this.stopping.signal.aborted)
          this.logger.warn(
            { err: String(err), key, config: hookId },
            'a2a push: delivery stopped on an error',
          );
      })
      .finally(() => this.running.delete(worker));
  }

  private async hookOf(
    key: string,
    hookId: string,
  ): Promise<{ doc: TaskWebhooksDoc; hook: TaskWebhook } | null> {
    const found = await this.deps.store.get(key);
    const hook = found?.doc.webhooks.find((w) => w.id === hookId);
    return found && hook && !hook.done ? { doc: found.doc, hook } : null;
  }

  private async run(key: string, hookId: string): Promise<void> {
    const signal = this.stopping.signal;
    const first = await this.hookOf(key, hookId);
    if (!first) return;
    const { capsule, logContext, taskId, createdAt } = first.doc;
    let cursor = first.hook.cursor;
    const task = new TaskProjector(taskId);
    const onEvent = async (e: TaskEvent, offset: number): Promise<void> => {
      // The Task itself is the answer to the send; notifications are its updates.
      if (offset <= cursor || e.type === 'task') return;
      await this.deliver(key, hookId, capsule, task, e, offset);
      cursor = offset;
    };
    while (!signal.aborted && this.deps.owns(capsule)) {
      await catchUp(this.core, capsule, logContext, task, onEvent);
      if (task.terminal) return this.finish(key, hookId);
      if (!task.meta && Date.now() - createdAt > ORPHAN_MS) {
        this.logger.info({ key }, 'a2a push: the task never reached the log; its configs are dropped');
        return this.update(key, () => null);
      }
      await this.core.waitAfter(capsule, task.cursor, 1, WAIT_MS, signal);
      if (!(await this.hookOf(key, hookId))) return;
    }
  }

  /** One event to one config, retried until acknowledged (or the worker stops). */
  private async deliver(
    key: string,
    hookId: string,
    capsule: string,
    task: TaskProjector,
    e: TaskEvent,
    offset: number,
  ): Promise<void> {
    const signal = this.stopping.signal;
    for (let attempts = 1; ; attempts++) {
      if (signal.aborted || !this.deps.owns(capsule)) throw new Stopped();
      // Read each time: the config may have been replaced (a new URL) or deleted meanwhile.
      const current = await this.hookOf(key, hookId);
      if (!current) throw new Stopped();
      const { hook } = current;
      if (hook.cursor >= offset) return; // acknowledged through another replica (a handover)
      const body = JSON.stringify(new Renderer(hook.wire as Dialect).event(task, e));
      const verdict = await postWebhook({
        url: hook.url,
        body,
        headers: headersOf(hook, offset),
        policy: this.deps.receivers,
        names: { field: 'url', loopbackSetting: 'a2a.pushNotifications.webhooks.allowLoopback' },
        timeoutMs: this.deps.timeoutMs,
        signal,
      });
      if (verdict.ok) {
        await this.update(key, (doc) => {
          const h = doc.webhooks.find((w) => w.id === hookId);
          if (h) h.cursor = Math.max(h.cursor, offset);
          return doc;
        });
        return;
      }
      const waitMs = retryDelayMs(attempts, Math.random, this.deps.retryFirstMs);
      this.logger.info(
        { key, config: hookId, offset, why: verdict.why, attempts, waitMs },
        'a2a push: delivery failed; retrying',
      );
      await sleep(waitMs, signal);
    }
  }

  /** The terminal event is acknowledged: the config is done, and the task's document with its last one. */
  private finish(key: string, hookId: string): Promise<void> {
    return this.update(key, (doc) => {
      const h = doc.webhooks.find((w) => w.id === hookId);
      if (h) h.done = true;
      return doc.webhooks.every((w) => w.done) ? null : doc;
    });
  }

  private async update(key: string, fn: (doc: TaskWebhooksDoc) => TaskWebhooksDoc | null): Promise<void> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const current = await this.deps.store.get(key);
      if (!current) return;
      const put = await this.deps.store.put(
        key,
        current.version,
        fn(structuredClone(current.doc)),
        this.deps.maxTasksPerOwner,
      );
      if (put.kind !== 'moved') return;
    }
    throw new Error(`push notification configs of ${key}: kept racing another writer`);
  }
}
