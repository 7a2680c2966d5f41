/**
 * `POST …/invoke`: submit one message, follow its task's frames in the log until the final status,
 * and answer as unnamed SSE frames (`delta`, `reasoning`, `error`, `done`) or as blocking JSON
 * (BeeOS "Streaming" §2). Submission outcome → HTTP errors happen in routes before streaming.
 */
import { clientContext } from '../../src/auth/namespace.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { LogRecord } from '../../src/log/record.js';
import { viewFrame } from '../../src/log/frame-view.js';
import type { InvokeFrame } from './codec.js';
import { encodeInvokeFrame, KEEPALIVE_BYTES } from './codec.js';
import { ERROR_TABLE } from './errors.js';
import type { BeeosErrorCode } from './errors.js';
import { openSse } from './sse-out.js';
import type { Context } from 'hono';

export interface InvokeTarget {
  capsule: string;
  taskId: string;
  contextId: string;
  /** Offset of the submission record: the task's frames come after it. */
  after: number;
  timeoutMs: number;
  /** How long the capsule may stay lost (upstream-lost, no upstream-connected) before a 503. */
  lostGraceMs: number;
}

type Sink = (frame: InvokeFrame) => void;

const transportError = (code: BeeosErrorCode, message: string): InvokeFrame[] => [
  { type: 'error', code, status_code: ERROR_TABLE[code].status, message },
  { type: 'done', is_error: true, code, error: message },
];

/**
 * Follow the task; call `sink` per frame and end with exactly one `done`. Resolves when done was
 * emitted or the caller aborted.
 */
const followInvoke = (
  deps: AdapterDeps,
  target: InvokeTarget,
  sink: Sink,
  signal: AbortSignal,
): Promise<void> =>
  new Promise<void>((resolve) => {
    const { core } = deps;
    const abort = new AbortController();
    let finished = false;
    const finish = (frames: InvokeFrame[]): void => {
      if (finished) return;
      finished = true;
      for (const f of frames) sink(f);
      cleanup();
    };
    // The capsule became unreachable mid-task: a network blip heals with a reconnect (and the
    // replay brings the missed frames), so only a capsule still lost after the grace is an error.
    let lostTimer: NodeJS.Timeout | null = null;
    const unavailable = (why: string): void => finish(transportError('agent_service_unavailable', why));
    const onFact = (record: LogRecord & { kind: 'fact' }): void => {
      if (record.fact === 'capsule-closed') unavailable('agent closed its stream');
      else if (record.fact === 'upstream-lost')
        lostTimer ??= setTimeout(() => unavailable('agent became unreachable'), target.lostGraceMs);
      else if (record.fact === 'upstream-connected' && lostTimer) {
        clearTimeout(lostTimer);
        lostTimer = null;
      } else if (
        record.fact === 'capsule-session-started' ||
        (record.fact === 'frames-possibly-missing' && record.reason === 'capsule-restarted')
      )
        // A new capsule session: the task died with the old process and will never end.
        unavailable('agent restarted and lost the task');
    };
    const onRecords = (records: readonly LogRecord[]): void => {
      for (const record of records) {
        if (finished) return;
        if (record.kind === 'fact') {
          onFact(record);
          continue;
        }
        const view = viewFrame(record);
        if (!view || view.taskId !== target.taskId) continue;
        if (view.event === 'text' && view.text) sink({ type: 'delta', text: view.text });
        else if (view.event === 'thinking' && view.text) sink({ type: 'reasoning', text: view.text });
        else if (view.event === 'status' && view.final && view.message !== 'input-timeout') {
          if (view.state === 'completed')
            return finish([
              { type: 'done', text: view.response ?? '', context_id: clientContext(target.contextId) },
            ]);
          const error = view.message ?? String(view.state);
          const code = view.state === 'rejected' ? 'conflict' : 'agent_reply_error';
          return finish([
            {
              type: 'done',
              is_error: true,
              code,
              error,
              text: error,
              context_id: clientContext(target.contextId),
            },
          ]);
        }
      }
    };
    const timer = setTimeout(
      () => finish(transportError('service_timeout', 'agent did not answer in time')),
      target.timeoutMs,
    );
    const onShutdown = (): void =>
      finish(transportError('agent_service_unavailable', 'gateway is shutting down'));
    const onAbort = (): void => {
      finished = true;
      cleanup();
    };
    const subscription = core.subscribe(target.capsule, {
      after: target.after,
      surface: 'beeos',
      onRecords,
      onEnd: (reason) => {
        if (reason === 'shutdown') onShutdown();
        else if (reason === 'store_unreachable')
          finish(transportError('agent_service_unavailable', 'log store unreachable from this replica'));
        else if (reason !== 'closed')
          finish(transportError('agent_service_unavailable', 'lost the agent stream'));
      },
      maxQueuedRecords: deps.config.maxQueuedRecords,
      signal: abort.signal,
    });
    core.shutdownSignal.addEventListener('abort', onShutdown, { once: true });
    signal.addEventListener('abort', onAbort, { once: true });
    if (core.shutdownSignal.aborted) queueMicrotask(onShutdown);
    function cleanup(): void {
      clearTimeout(timer);
      if (lostTimer) clearTimeout(lostTimer);
      core.shutdownSignal.removeEventListener('abort', onShutdown);
      signal.removeEventListener('abort', onAbort);
      abort.abort();
      subscription.close();
      resolve();
    }
  });

/** SSE invoke: frames as they come, keepalive comments, close after `done`. */
export const streamInvoke = (
  c: Context,
  deps: AdapterDeps,
  target: InvokeTarget,
  signal: AbortSignal,
): Response => {
  const { stream, response } = openSse(c, {
    heartbeat: { bytes: KEEPALIVE_BYTES, everyMs: deps.config.heartbeatMs },
  });
  // A client gone (or cut past the byte bound) stops following the task.
  const stop = new AbortController();
  stream.onClose(() => stop.abort());
  const both = AbortSignal.any([signal, stop.signal]);
  void followInvoke(deps, target, (f) => stream.write(Buffer.from(encodeInvokeFrame(f))), both).then(() =>
    stream.end(),
  );
  return response;
};

export interface InvokeJson {
  /** HTTP status: 200 for a reply (even an in-band error), the transport code's status otherwise. */
  status: number;
  done: Extract<InvokeFrame, { type: 'done' }>;
  reasoning: string;
  error?: { code: BeeosErrorCode; message: string };
}

/** Blocking invoke: collect until `done`. */
export const collectInvoke = async (
  deps: AdapterDeps,
  target: InvokeTarget,
  signal: AbortSignal,
): Promise<InvokeJson> => {
  let done: InvokeJson['done'] | null = null;
  let reasoning = '';
  let error: InvokeJson['error'];
  await followInvoke(
    deps,
    target,
    (f) => {
      if (f.type === 'done') done = f;
      else if (f.type === 'reasoning') reasoning += f.text;
      else if (f.type === 'error') error = { code: f.code as BeeosErrorCode, message: f.message };
    },
    signal,
  );
  const final: InvokeJson['done'] = done ?? { type: 'done', is_error: true, code: 'internal_error' };
  return {
    status: error ? ERROR_TABLE[error.code].status : 200,
    done: final,
    reasoning,
    ...(error ? { error } : {}),
  };
};
