/**
 * The streaming answers (`SendStreamingMessage`, `SubscribeToTask`): SSE whose every event carries
 * the offset of the record that made it as `id:`. `SubscribeToTask` with `Last-Event-ID` replays
 * exactly from there; without one it starts with a Task snapshot (spec §3.1.6).
 */
import { ownerContext } from '../../src/auth/namespace.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { lookup, type Call } from './call.js';
import { A2aError, CODE, errorBody, fromCoreError, invalidParams, taskNotFound } from './errors.js';
import { parseTaskQuery } from './params.js';
import { TaskProjector, type TaskEvent } from './projection.js';
import { catchUp, follow } from './task-reader.js';
import { contextOfTask } from './task-ids.js';

/**
 * What a stream holds unsent for its client: past it, it reads no more of the log until the client
 * takes some (its cursor waits in the log, not in memory).
 */
const STREAM_BUFFER_BYTES = 64 * 1024;

export type Replay = { e: TaskEvent; offset: number }[];

export interface TaskStreams {
  subscribe(call: Call): Promise<Response>;
  /**
   * The SSE answer: `replay` events (a Last-Event-ID resume) or, when null, a Task snapshot with the
   * fold's cursor as its id; then live events until the task ends (spec §3.1.2: the stream closes at
   * a terminal state) or the client goes.
   */
  stream(call: Call, task: TaskProjector, logContext: string, replay: Replay | null): Response;
}

export const taskStreams = ({ core, config, logger }: AdapterDeps): TaskStreams => {
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
        const early: Replay = [];
        await catchUp(core, call.capsule, logContext, task, (e, offset) => {
          if (offset > cursor) early.push({ e, offset });
        });
        if (!task.meta || task.meta.owner !== call.principal.owner) throw taskNotFound();
        return stream(call, task, logContext, early);
      }
      // A cursor from another epoch, beyond the head or trimmed: start over from a snapshot.
    }
    const { task, logContext } = await lookup(core, call, q.id);
    if (task.terminal)
      throw new A2aError(CODE.unsupportedOperation, 'the task has ended: read it with GetTask');
    return stream(call, task, logContext, null);
  };

  const stream = (call: Call, task: TaskProjector, logContext: string, replay: Replay | null): Response => {
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

  return { subscribe, stream };
};

/** A Last-Event-ID of this surface: a log offset. Anything else is a bad cursor. */
const parseCursor = (v: string): number => {
  const t = v.trim();
  if (!/^\d{1,16}$/.test(t)) throw invalidParams('Last-Event-ID must be an event id this server sent');
  return Number(t);
};
