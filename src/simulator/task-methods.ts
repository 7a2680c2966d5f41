/**
 * The door's JSON (non-streaming) methods: tasks/get, tasks/cancel, the 1.0 `SendMessage` and the
 * 0.5+ authenticated extended card, each answering the way its release line does (rules in
 * release-line.ts). Shared by both method-name sets (0.3 names and the A2A 1.0 names).
 */
import type { ServerResponse } from 'node:http';
import { agentCard } from './agent-card.js';
import { messageText, parseMessageParams, type A2AMessage } from './message.js';
import type { LineRules } from './release-line.js';
import { RPC, sendRpcError, sendRpcResult, taskJson, type RpcId } from './rpc.js';
import type { Session } from './session.js';
import type { ContinueResult, TaskEntry } from './tasks.js';

const taskIdParam = (params: unknown): string | null => {
  if (typeof params !== 'object' || params === null) return null;
  const id = (params as Record<string, unknown>).id;
  return typeof id === 'string' ? id : null;
};

/** 1.0 requires `role: "ROLE_USER"`; the text is serde's, for an enum with that one variant. */
export const roleError = (rules: LineRules, message: A2AMessage): string | null =>
  rules.a2a1 && message.role !== 'ROLE_USER'
    ? `unknown variant \`${message.role}\`, expected \`ROLE_USER\``
    : null;

/** Submit a parsed message: a new task, or (1.0, `taskId` set) a continuation of an ended one. */
export const submitMessage = (session: Session, message: A2AMessage): ContinueResult => {
  const text = messageText(message);
  if (session.rules.a2a1 && message.taskId !== undefined)
    return session.runner.continueTask(message.taskId, text);
  return session.runner.submit(text, message.contextId);
};

export const tasksGet = (session: Session, res: ServerResponse, id: RpcId, params: unknown): void => {
  const taskId = taskIdParam(params);
  if (taskId === null) return sendRpcError(res, id, RPC.invalidParams);
  const task = session.runner.get(taskId);
  if (!task) return sendRpcError(res, id, RPC.taskNotFound);
  sendRpcResult(res, id, taskJson(task, session.rules.a2a1));
};

export const tasksCancel = (session: Session, res: ServerResponse, id: RpcId, params: unknown): void => {
  const taskId = taskIdParam(params);
  if (taskId === null) return sendRpcError(res, id, RPC.invalidParams);
  const result = session.runner.cancel(taskId);
  const a2a1 = session.rules.a2a1;
  if (result.ok) return sendRpcResult(res, id, taskJson(result.task, a2a1));
  const ended = result.reason === 'not-cancelable' ? session.runner.get(taskId) : undefined;
  // 0.6: cancelling an ended task is not an error; the task comes back as it was.
  if (ended && session.rules.cancelEndedReturnsTask) return sendRpcResult(res, id, taskJson(ended, a2a1));
  sendRpcError(res, id, result.reason === 'not-found' ? RPC.taskNotFound : RPC.taskNotCancelable);
};

/**
 * 1.0 `SendMessage`: the non-streaming send. It blocks until the task ends and answers the task as
 * `GetTask` would (a refused one as TASK_STATE_REJECTED).
 */
export const sendMessage = async (
  session: Session,
  options: { acceptance: 'none' | 'single' | 'queue' },
  res: ServerResponse,
  id: RpcId,
  params: unknown,
): Promise<void> => {
  if (options.acceptance === 'none') return sendRpcError(res, id, RPC.methodNotFound);
  const parsed = parseMessageParams(params);
  const bad = parsed.ok ? roleError(session.rules, parsed.message) : parsed.error;
  if (!parsed.ok || bad !== null) {
    return sendRpcError(res, id, { code: RPC.invalidParams.code, message: `Invalid params: ${bad ?? ''}` });
  }
  const result = submitMessage(session, parsed.message);
  if (result.kind === 'not-found') return sendRpcError(res, id, RPC.taskNotFound);
  if (result.kind === 'not-continuable') return sendRpcError(res, id, RPC.unsupportedOperation);
  if (result.kind === 'rejected') {
    const refused: TaskEntry = {
      ...result.task,
      state: 'rejected',
      message: 'task rejected: capsule is busy',
    };
    return sendRpcResult(res, id, taskJson(refused, true));
  }
  await result.task.done;
  if (!res.destroyed) sendRpcResult(res, id, taskJson(result.task, true));
};

/** 0.5+ extended card (behind the door token like every POST): always names the session. */
export const extendedCard = (session: Session, url: string, res: ServerResponse, id: RpcId): void =>
  sendRpcResult(
    res,
    id,
    agentCard({ rules: session.rules, sessionId: session.id, url, authenticated: true }, true),
  );
