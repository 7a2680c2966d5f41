/**
 * The task methods (notes A3): SendMessage and SendStreamingMessage through the capsule's submission
 * queue (a busy capsule queues, never rejects), GetTask and ListTasks as folds of the log, CancelTask
 * from any replica. A webhook in SendMessage's configuration is stored before the submission is
 * queued, so its deliveries start with the task's first update.
 */
import { randomUUID } from 'node:crypto';
import { clientContext, ownerContext } from '../../src/auth/namespace.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { taskWebhooksKey } from '../../src/webhooks/task-webhooks.js';
import { lookup, record, result, type Call } from './call.js';
import { stateFromWire } from './dialect.js';
import { A2aError, CODE, invalidParams, pushNotSupported } from './errors.js';
import { parseMessage, parseTaskQuery } from './params.js';
import { TaskProjector, type A2aMeta } from './projection.js';
import type { PushConfigs, PushTask } from './push-configs.js';
import type { PushDelivery } from './push-delivery.js';
import { parsePushConfig, urlField, type PushConfigInput } from './push-params.js';
import { catchUp, follow, ownerTasks, readTask } from './task-reader.js';
import { mintTaskId } from './task-ids.js';
import type { TaskStreams } from './task-stream.js';

/** Tasks ListTasks looks through (the capsule's log, newest last), and its page bounds. */
const LIST_SCAN = 100_000;
const LIST_PAGE = 50;
const LIST_PAGE_MAX = 100;
/** How long CancelTask waits for the capsule's `canceled` status before answering the task as it is. */
const CANCEL_WAIT_MS = 10_000;

export interface TaskMethods {
  send(call: Call, streaming: boolean): Promise<Response>;
  getTask(call: Call): Promise<Response>;
  listTasks(call: Call): Promise<Response>;
  cancelTask(call: Call): Promise<Response>;
}

export const taskMethods = (
  deps: AdapterDeps,
  streams: TaskStreams,
  push: { configs: PushConfigs; delivery: PushDelivery } | null,
): TaskMethods => {
  const { core, config } = deps;

  /** Follow the task until it ends or waits for input, at most `ms`. */
  const settle = async (
    capsule: string,
    logContext: string,
    task: TaskProjector,
    ms: number,
  ): Promise<void> => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), ms);
    const stop = (): void => abort.abort();
    core.shutdownSignal.addEventListener('abort', stop);
    try {
      await follow(
        core,
        capsule,
        logContext,
        task,
        (e) => {
          if (e.type === 'status' && e.status.state === 'input-required') abort.abort();
        },
        { waitMs: ms, signal: abort.signal },
      );
    } finally {
      clearTimeout(timer);
      core.shutdownSignal.removeEventListener('abort', stop);
    }
  };

  /** The inline webhook, checked before anything is stored or queued. */
  const inlinePush = (call: Call, raw: unknown): PushConfigInput | null => {
    if (raw === null) return null;
    if (!push) throw pushNotSupported();
    const prefix =
      call.dialect === '1.0'
        ? 'configuration.taskPushNotificationConfig'
        : 'configuration.pushNotificationConfig';
    const input = parsePushConfig(raw, call.dialect, prefix);
    push.configs.check(input, urlField(call.dialect, true));
    return input;
  };

  const send = async (call: Call, streaming: boolean): Promise<Response> => {
    const msg = parseMessage(call.params, call.dialect);
    const webhook = inlinePush(call, msg.push);
    const clientCtx = msg.contextId ?? `ctx-${randomUUID()}`;
    const logContext = ownerContext(call.principal, clientCtx);
    const taskId = mintTaskId(clientCtx);
    const meta: A2aMeta = { taskId, contextId: clientCtx, messageId: msg.messageId, text: msg.text };
    const pushTask: PushTask = { capsule: call.capsule, owner: call.principal.owner, taskId, logContext };
    // Stored first (its bounds refuse before anything is queued), from the task's start: the
    // deliverer sends every update after the submission, whichever replica owns the capsule.
    if (push && webhook) await push.configs.set(pushTask, webhook, call.dialect, 0);
    const submissionId = randomUUID();
    let submitted;
    try {
      submitted = await core.submit(call.capsule, {
        text: msg.text,
        contextId: logContext,
        messageId: submissionId,
        record: { protocol: 'a2a', owner: call.principal.owner, meta: { a2a: meta } },
        queue: true,
      });
    } catch (err) {
      if (push && webhook) await push.configs.drop(call.capsule, taskId).catch(() => undefined);
      throw err;
    }
    if (push && webhook)
      void push.delivery.kick(taskWebhooksKey(call.capsule, taskId)).catch(() => undefined);
    const outcome = submitted.outcome;
    if (outcome.kind === 'method-not-found')
      throw new A2aError(CODE.unsupportedOperation, 'the capsule accepts no tasks');
    if (outcome.kind === 'unreachable')
      throw new A2aError(CODE.internal, `the capsule is unreachable: ${outcome.reason}`, 503, {
        'retry-after': '1',
      });
    if (outcome.kind === 'rejected' || outcome.kind === 'invalid')
      throw new A2aError(CODE.internal, 'the capsule refused the message');
    const task = new TaskProjector(taskId);
    await catchUp(core, call.capsule, logContext, task);
    // Sent at once (no queue): this request knows the capsule's task id, the log links its frames.
    if (outcome.kind === 'accepted') task.capsuleTaskId ??= outcome.taskId;
    if (!task.meta) throw new A2aError(CODE.internal, 'the submission is not in the log');
    if (streaming) return streams.stream(call, task, logContext, null);
    const cfg = record(call.params.configuration) ?? {};
    const waits = call.dialect === '1.0' ? cfg.returnImmediately !== true : cfg.blocking !== false;
    if (waits) await settle(call.capsule, logContext, task, config.longPollMaxMs);
    return result(call, call.render.sendResult(task));
  };

  const getTask = async (call: Call): Promise<Response> => {
    const q = parseTaskQuery(call.params);
    const { task } = await lookup(core, call, q.id);
    const rendered = call.render.task(task);
    if (q.historyLength !== undefined && Array.isArray(rendered.history))
      rendered.history = q.historyLength === 0 ? [] : rendered.history.slice(-q.historyLength);
    return result(call, rendered);
  };

  const listTasks = async (call: Call): Promise<Response> => {
    const p = call.params;
    const pageSize = p.pageSize === undefined ? LIST_PAGE : Number(p.pageSize);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > LIST_PAGE_MAX)
      throw invalidParams(`pageSize must be an integer from 1 to ${LIST_PAGE_MAX}`);
    const contextFilter = p.contextId === undefined || p.contextId === '' ? null : p.contextId;
    if (contextFilter !== null && typeof contextFilter !== 'string')
      throw invalidParams('contextId must be a string');
    const stateFilter =
      p.status === undefined || p.status === '' || p.status === 'TASK_STATE_UNSPECIFIED'
        ? null
        : typeof p.status === 'string'
          ? stateFromWire(p.status)
          : undefined;
    if (stateFilter === undefined) throw invalidParams('status must be a task state');
    const token = p.pageToken === undefined || p.pageToken === '' ? null : Number(p.pageToken);
    if (token !== null && !Number.isSafeInteger(token))
      throw invalidParams('pageToken is not one this server gave');
    let found = await ownerTasks(core, call.capsule, call.principal.owner, LIST_SCAN);
    if (contextFilter !== null)
      found = found.filter(
        (f) =>
          clientContext(f.logContext) === contextFilter &&
          f.logContext === ownerContext(call.principal, contextFilter),
      );
    const tasks: TaskProjector[] = [];
    for (const f of found.reverse()) {
      const t = await readTask(core, call.capsule, f.logContext, f.taskId);
      if (t && (stateFilter === null || t.status.state === stateFilter)) tasks.push(t);
    }
    const start = token ?? 0;
    const page = tasks.slice(start, start + pageSize);
    const next = start + pageSize < tasks.length ? String(start + pageSize) : '';
    return result(call, {
      tasks: page.map((t) => call.render.task(t)),
      nextPageToken: next,
      pageSize,
      totalSize: tasks.length,
    });
  };

  const cancelTask = async (call: Call): Promise<Response> => {
    const q = parseTaskQuery(call.params);
    const { task, logContext } = await lookup(core, call, q.id);
    if (task.terminal) throw new A2aError(CODE.taskNotCancelable, 'Task cannot be canceled: it has ended');
    if (task.capsuleTaskId === null) {
      // Still queued: withdrawn before it reaches the capsule (the context's other tasks stay queued).
      await core.withdrawSubmission(
        call.capsule,
        task.meta!.submissionId,
        'aborted',
        'task canceled before it started',
      );
    } else {
      const outcome = await core.cancel(call.capsule, task.capsuleTaskId);
      if (outcome.kind === 'unreachable')
        throw new A2aError(CODE.internal, `the capsule is unreachable: ${outcome.reason}`, 503, {
          'retry-after': '1',
        });
      if (outcome.kind === 'method-not-found')
        throw new A2aError(CODE.taskNotCancelable, 'the capsule cannot cancel tasks');
    }
    await settle(call.capsule, logContext, task, CANCEL_WAIT_MS);
    if (!task.terminal) await catchUp(core, call.capsule, logContext, task);
    return result(call, call.render.task(task));
  };

  return { send, getTask, listTasks, cancelTask };
};
