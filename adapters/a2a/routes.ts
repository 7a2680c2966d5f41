/**
 * `/a2a/{capsule}/`: the agent card and the JSON-RPC methods (notes a2a-and-webhooks.md A1–A4).
 * Submissions go through the capsule's submission queue (a busy capsule queues, never rejects);
 * every read is a fold of the log, so any replica answers for any task. Streamed events carry the
 * offset of the record that made them as `id:`; `SubscribeToTask` with `Last-Event-ID` replays
 * exactly from there, without one it starts with a Task snapshot.
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { clientContext, ownerContext } from '../../src/auth/namespace.js';
import { may, principalOf, seesCapsule, type Principal } from '../../src/auth/principal.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';
import { agentCard, interfaceUrl } from './card.js';
import { dialectOf, operationOf, Renderer, stateFromWire, type Dialect, type Operation } from './dialect.js';
import {
  A2aError,
  CODE,
  capsuleNotFound,
  errorBody,
  errorResponse,
  fromCoreError,
  invalidParams,
  pushNotSupported,
  taskNotFound,
  type RpcId,
} from './errors.js';
import { parseMessage, parseTaskQuery } from './params.js';
import { TaskProjector, type A2aMeta, type TaskEvent } from './projection.js';
import { catchUp, follow, ownerTasks, readTask } from './task-reader.js';
import { contextOfTask, mintTaskId } from './task-ids.js';
import { randomUUID } from 'node:crypto';

const CARD = '/a2a/:capsule/.well-known/agent-card.json';
const RPC = '/a2a/:capsule/';
/** Tasks ListTasks looks through (the capsule's log, newest last), and its page bounds. */
const LIST_SCAN = 100_000;
const LIST_PAGE = 50;
const LIST_PAGE_MAX = 100;
/**
 * What a stream holds unsent for its client: past it, it reads no more of the log until the client
 * takes some (its cursor waits in the log, not in memory).
 */
const STREAM_BUFFER_BYTES = 64 * 1024;
/** How long CancelTask waits for the capsule's `canceled` status before answering the task as it is. */
const CANCEL_WAIT_MS = 10_000;

interface Call {
  capsule: string;
  principal: Principal;
  dialect: Dialect;
  render: Renderer;
  id: RpcId;
  params: Record<string, unknown>;
  lastEventId: string | undefined;
}

const record = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
  });

const isJson = (contentType: string | undefined): boolean => {
  const t = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return t === 'application/json' || t === 'application/a2a+json';
};

export const createRoutes = (deps: AdapterDeps): Hono => {
  const { core, config, logger } = deps;
  const app = new Hono();

  /** Who may call: authenticated, the capsule visible, `submit` on it (else refused as not there). */
  const admit = (c: Context, capsule: string): Principal => {
    const principal = principalOf(c);
    if (principal.kind === 'anonymous')
      throw new A2aError(CODE.server, 'a valid credential is required (Authorization: Bearer …)', 401);
    if (!core.hasCapsule(capsule) || !seesCapsule(principal, capsule)) throw capsuleNotFound();
    if (!may(principal, 'submit', capsule))
      throw new A2aError(CODE.server, 'this credential lacks the "submit" scope', 403);
    return principal;
  };

  app.get(CARD, async (c) => {
    try {
      const capsule = c.req.param('capsule');
      admit(c, capsule);
      const url = interfaceUrl(c.req.url, config.publicUrl, capsule);
      return json(await agentCard(core, capsule, url));
    } catch (err) {
      return errorResponse(null, failure(err, c));
    }
  });
  app.all(CARD, () =>
    errorResponse(null, new A2aError(CODE.invalidRequest, 'method not allowed', 405, { allow: 'GET' })),
  );

  const failure = (err: unknown, c: Context): A2aError => {
    if (err instanceof A2aError) return err;
    const e = fromCoreError(err);
    if (e.code === CODE.internal && e.status === 200) {
      countUnexpected('request');
      logger.error({ err, path: c.req.path }, 'a2a: unhandled error');
    }
    return e;
  };

  const tooLarge = (): Response =>
    errorResponse(null, new A2aError(CODE.invalidRequest, 'request body too large', 413));

  app.post(
    RPC,
    bodyLimit({ maxSize: config.bodyLimitBytes, onError: () => Promise.resolve(tooLarge()) }),
    async (c) => {
      let id: RpcId = null;
      try {
        const capsule = c.req.param('capsule');
        const principal = admit(c, capsule);
        if (!isJson(c.req.header('content-type')))
          throw new A2aError(CODE.invalidRequest, 'Content-Type must be application/json', 415);
        let body: unknown;
        try {
          body = JSON.parse(await c.req.text());
        } catch {
          throw new A2aError(CODE.parse, 'Parse error');
        }
        const req = record(body);
        if (req && (typeof req.id === 'string' || typeof req.id === 'number')) id = req.id;
        if (!req || req.jsonrpc !== '2.0' || typeof req.method !== 'string' || id === null)
          throw new A2aError(CODE.invalidRequest, 'Invalid Request');
        const dialect = dialectOf(c.req.header('a2a-version'));
        if (dialect === null)
          throw new A2aError(
            CODE.versionNotSupported,
            'A2A-Version not supported: this interface offers 1.0 and 0.3',
          );
        const op = operationOf(dialect, req.method);
        if (op === null) throw new A2aError(CODE.methodNotFound, 'Method not found');
        const params = req.params === undefined ? {} : record(req.params);
        if (!params) throw invalidParams('params must be an object');
        const call: Call = {
          capsule,
          principal,
          dialect,
          render: new Renderer(dialect),
          id,
          params,
          lastEventId: c.req.header('last-event-id'),
        };
        return await dispatch(op, call);
      } catch (err) {
        return errorResponse(id, failure(err, c));
      }
    },
  );
  app.all(RPC, () =>
    errorResponse(null, new A2aError(CODE.invalidRequest, 'method not allowed', 405, { allow: 'POST' })),
  );

  const dispatch = (op: Operation, call: Call): Promise<Response> => {
    switch (op) {
      case 'SendMessage':
        return send(call, false);
      case 'SendStreamingMessage':
        return send(call, true);
      case 'GetTask':
        return getTask(call);
      case 'ListTasks':
        return listTasks(call);
      case 'CancelTask':
        return cancelTask(call);
      case 'SubscribeToTask':
        return subscribe(call);
      case 'PushNotificationConfig':
        return Promise.reject(pushNotSupported());
      case 'GetExtendedAgentCard':
        return Promise.reject(
          new A2aError(CODE.extendedAgentCardNotConfigured, 'Extended agent card is not configured'),
        );
    }
  };

  const result = (call: Call, value: unknown): Response =>
    json({ jsonrpc: '2.0', id: call.id, result: value });

  /** The task a call names, folded to the head (-32001 when it is not the caller's). */
  const lookup = async (call: Call, taskId: string): Promise<{ task: TaskProjector; logContext: string }> => {
    const ctx = contextOfTask(taskId);
    if (ctx === null) throw taskNotFound();
    const logContext = ownerContext(call.principal, ctx);
    const task = await readTask(core, call.capsule, logContext, taskId);
    if (!task || task.meta?.owner !== call.principal.owner) throw taskNotFound();
    return { task, logContext };
  };

  const send = async (call: Call, streaming: boolean): Promise<Response> => {
    const msg = parseMessage(call.params, call.dialect);
    const clientCtx = msg.contextId ?? `ctx-${randomUUID()}`;
    const logContext = ownerContext(call.principal, clientCtx);
    const taskId = mintTaskId(clientCtx);
    const meta: A2aMeta = { taskId, contextId: clientCtx, messageId: msg.messageId, text: msg.text };
    const submissionId = randomUUID();
    const submitted = await core.submit(call.capsule, {
      text: msg.text,
      contextId: logContext,
      messageId: submissionId,
      record: { protocol: 'a2a', owner: call.principal.owner, meta: { a2a: meta } },
      queue: true,
    });
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
    if (streaming) return stream(call, task, logContext, null);
    const cfg = record(call.params.configuration) ?? {};
    const waits = call.dialect === '1.0' ? cfg.returnImmediately !== true : cfg.blocking !== false;
    if (waits) await settle(call.capsule, logContext, task, config.longPollMaxMs);
    return result(call, call.render.sendResult(task));
  };

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

  const getTask = async (call: Call): Promise<Response> => {
    const q = parseTaskQuery(call.params);
    const { task } = await lookup(call, q.id);
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
    const { task, logContext } = await lookup(call, q.id);
    if (task.terminal) throw new A2aError(CODE.taskNotCancelable, 'Task cannot be canceled: it has ended');
    if (task.capsuleTaskId === null) {
      // Still queued: it never reaches the capsule. (The context's other queued tasks go with it.)
      await core.withdrawContext(call.capsule, logContext, 'aborted', 'task canceled before it started');
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

  const subscribe = async (call: Call): Promise<Response> => {
    const q = parseTaskQuery(call.params);
    const cursor = call.lastEventId === undefined ? null : parseCursor(call.lastEventId);
    if (cursor !== null) {
      const status = await core.cursorStatus(call.capsule, cursor);
      if (status.status === 'ok') {
        const ctx = contextOfTask(q.id);
        if (ctx === null) throw taskNotFound();
        const logContext = ownerContext(call.principal, ctx);
        // Fold up to the cursor silently, then stream what came after it.
        const task = new TaskProjector(q.id);
        const early: { e: TaskEvent; offset: number }[] = [];
        await catchUp(core, call.capsule, logContext, task, (e, offset) => {
          if (offset > cursor) early.push({ e, offset });
        });
        if (!task.meta || task.meta.owner !== call.principal.owner) throw taskNotFound();
        return stream(call, task, logContext, early);
      }
      // A cursor from another epoch, beyond the head or trimmed: start over from a snapshot.
    }
    const { task, logContext } = await lookup(call, q.id);
    if (task.terminal)
      throw new A2aError(CODE.unsupportedOperation, 'the task has ended: read it with GetTask');
    return stream(call, task, logContext, null);
  };

  /**
   * The SSE answer: `replay` events (a Last-Event-ID resume) or, when null, a Task snapshot with the
   * fold's cursor as its id; then live events until the task ends (spec §3.1.2: the stream closes at
   * a terminal state) or the client goes.
   */
  const stream = (
    call: Call,
    task: TaskProjector,
    logContext: string,
    replay: { e: TaskEvent; offset: number }[] | null,
  ): Response => {
    const abort = new AbortController();
    const onShutdown = (): void => abort.abort();
    core.shutdownSignal.addEventListener('abort', onShutdown);
    const enc = new TextEncoder();
    const frame = (e: TaskEvent, offset: number): Uint8Array =>
      enc.encode(
        `id: ${offset}\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: call.id, result: call.render.event(task, e) })}\n\n`,
      );
    let wake: (() => void) | null = null;
    const woken = (): void => {
      wake?.();
      wake = null;
    };
    abort.signal.addEventListener('abort', woken);
    const body = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          /** Enqueue once the client has room: a slow client holds back its own stream, nothing more. */
          const send = async (bytes: Uint8Array): Promise<void> => {
            while (!abort.signal.aborted && (controller.desiredSize ?? 1) <= 0)
              await new Promise<void>((resolve) => (wake = resolve));
            if (!abort.signal.aborted) controller.enqueue(bytes);
          };
          const produce = async (): Promise<void> => {
            if (replay === null) await send(frame({ type: 'task' }, task.cursor));
            else for (const { e, offset } of replay) await send(frame(e, offset));
            await follow(core, call.capsule, logContext, task, (e, offset) => send(frame(e, offset)), {
              waitMs: config.heartbeatMs,
              signal: abort.signal,
              idle: () => send(enc.encode(': keepalive\n\n')),
            });
          };
          void produce()
            .catch(async (err: unknown) => {
              if (abort.signal.aborted) return;
              logger.warn({ err, capsule: call.capsule }, 'a2a: a task stream ended on an error');
              await send(enc.encode(`data: ${errorBody(call.id, fromCoreError(err))}\n\n`));
            })
            .finally(() => {
              core.shutdownSignal.removeEventListener('abort', onShutdown);
              abort.abort();
              try {
                controller.close();
              } catch {
                // the client cancelled it already
              }
            });
        },
        pull: woken,
        cancel: () => abort.abort(),
      },
      new ByteLengthQueuingStrategy({ highWaterMark: STREAM_BUFFER_BYTES }),
    );
    return new Response(body, {
      status: 200,
      headers: {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        'x-accel-buffering': 'no',
      },
    });
  };

  return app;
};

/** A Last-Event-ID of this surface: a log offset. Anything else is a bad cursor. */
const parseCursor = (v: string): number => {
  const t = v.trim();
  if (!/^\d{1,16}$/.test(t)) throw invalidParams('Last-Event-ID must be an event id this server sent');
  return Number(t);
};
