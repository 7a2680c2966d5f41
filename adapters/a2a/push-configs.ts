/**
 * A2A push notification configs (spec §4.3.3) kept per task in the task-webhook store: set (a URL
 * checked against the gateway's one webhook SSRF policy first), read, listed, deleted, bounded per
 * task and per owner. Every change is a compare-and-set of the task's document, so it never undoes
 * a cursor the deliverer (push-delivery.ts) moved meanwhile.
 */
import type { A2aPushDeps } from '../../src/http/adapter-deps.js';
import { checkReceiverUrl } from '../../src/webhooks/receiver-url.js';
import { taskWebhooksKey, type TaskWebhook, type TaskWebhooksDoc } from '../../src/webhooks/task-webhooks.js';
import type { Dialect } from './dialect.js';
import { A2aError, CODE, invalidParams } from './errors.js';
import type { PushConfigInput } from './push-params.js';

/** The setting that admits loopback receivers, as a refusal names it. */
const LOOPBACK_SETTING = 'a2a.pushNotifications.webhooks.allowLoopback';
const MAX_CAS_TRIES = 20;

/** The task a config is set on, as the methods found it. */
export interface PushTask {
  capsule: string;
  owner: string | null;
  taskId: string;
  logContext: string;
}

export const configNotFound = (): A2aError =>
  new A2aError(CODE.taskNotFound, 'Push notification config not found');

/** A stored config on the wire of `dialect` (what Create/Get/List answer). */
export const renderConfig = (
  dialect: Dialect,
  taskId: string,
  hook: TaskWebhook,
): Record<string, unknown> => {
  const config = {
    id: hook.id,
    url: hook.url,
    ...(hook.token !== null ? { token: hook.token } : {}),
  };
  if (dialect === '1.0')
    return {
      taskId,
      ...config,
      ...(hook.authentication ? { authentication: hook.authentication } : {}),
    };
  return {
    taskId,
    pushNotificationConfig: {
      ...config,
      ...(hook.authentication
        ? {
            authentication: {
              schemes: [hook.authentication.scheme],
              credentials: hook.authentication.credentials,
            },
          }
        : {}),
    },
  };
};

export class PushConfigs {
  constructor(private readonly deps: A2aPushDeps) {}

  /** The URL against the SSRF policy (its literal host; names are resolved again at each delivery). */
  check(input: PushConfigInput, field: string): void {
    const checked = checkReceiverUrl(input.url, this.deps.receivers, {
      field,
      loopbackSetting: LOOPBACK_SETTING,
    });
    if (!checked.ok) throw invalidParams(checked.reason);
  }

  /**
   * Set (or replace, by id) a config; its events are those after log offset `cursor`. Refused past
   * `maxConfigsPerTask` on the task or `maxTasksPerOwner` tasks with configs of the owner.
   */
  async set(task: PushTask, input: PushConfigInput, dialect: Dialect, cursor: number): Promise<TaskWebhook> {
    const id = input.id ?? task.taskId;
    const hook: TaskWebhook = {
      id,
      url: input.url,
      token: input.token,
      authentication: input.authentication,
      wire: dialect,
      cursor,
      done: false,
    };
    await this.change(task.capsule, task.taskId, (doc) => {
      const next: TaskWebhooksDoc = doc ?? {
        capsule: task.capsule,
        owner: task.owner,
        taskId: task.taskId,
        logContext: task.logContext,
        createdAt: Date.now(),
        webhooks: [],
      };
      const prior = next.webhooks.findIndex((w) => w.id === id);
      if (prior >= 0) {
        // A replacement keeps how far the receiver got: it is the same config, re-sent.
        const old = next.webhooks[prior]!;
        next.webhooks[prior] = { ...hook, cursor: Math.max(old.cursor, cursor), done: old.done };
      } else {
        if (next.webhooks.length >= this.deps.maxConfigsPerTask)
          throw new A2aError(
            CODE.server,
            `this task has ${this.deps.maxConfigsPerTask} push notification configs already`,
          );
        next.webhooks.push(hook);
      }
      return next;
    });
    return hook;
  }

  /** The task's configs (none: an empty list). */
  async list(capsule: string, taskId: string): Promise<TaskWebhook[]> {
    return (await this.deps.store.get(taskWebhooksKey(capsule, taskId)))?.doc.webhooks ?? [];
  }

  /** Deletes one config (-32001 when it is not there); the task's last one takes the task's document. */
  async remove(capsule: string, taskId: string, id: string): Promise<void> {
    await this.change(capsule, taskId, (doc) => {
      if (!doc || !doc.webhooks.some((w) => w.id === id)) throw configNotFound();
      doc.webhooks = doc.webhooks.filter((w) => w.id !== id);
      return doc.webhooks.length === 0 ? null : doc;
    });
  }

  /** Every config of the task, gone (its submission was never recorded). */
  async drop(capsule: string, taskId: string): Promise<void> {
    await this.change(capsule, taskId, () => null);
  }

  private async change(
    capsule: string,
    taskId: string,
    fn: (doc: TaskWebhooksDoc | null) => TaskWebhooksDoc | null,
  ): Promise<void> {
    const key = taskWebhooksKey(capsule, taskId);
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const current = await this.deps.store.get(key);
      const next = fn(current ? structuredClone(current.doc) : null);
      if (next === null && !current) return;
      const put = await this.deps.store.put(key, current?.version ?? 0, next, this.deps.maxTasksPerOwner);
      if (put.kind === 'written') return;
      if (put.kind === 'owner_full')
        throw new A2aError(
          CODE.server,
          `this owner has push notification configs on ${this.deps.maxTasksPerOwner} tasks already`,
        );
    }
    throw new Error(`push notification configs of ${key}: kept racing another writer`);
  }
}
