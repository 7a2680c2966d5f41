/**
 * JSON (non-streaming) answers of the capsule's door: JSON-RPC results and errors, the 404 and the
 * door-token 401. Streaming endpoints live in server.ts.
 */
import type { ServerResponse } from 'node:http';
import type { TaskEntry } from './tasks.js';

/** JSON-RPC error codes the simulator answers with. */
export const RPC = {
  parseError: { code: -32700, message: 'Parse error' },
  invalidRequest: { code: -32600, message: 'Invalid Request' },
  methodNotFound: { code: -32601, message: 'Method not found' },
  invalidParams: { code: -32602, message: 'Invalid params' },
  taskNotFound: { code: -32001, message: 'Task not found' },
  taskNotCancelable: { code: -32002, message: 'Task cannot be canceled' },
  /** 1.0: a message continuing a task that has not ended yet. */
  unsupportedOperation: { code: -32004, message: 'Unsupported operation' },
  /** 1.0: the request has no (or more than one, or another) `A2A-Version` header. */
  versionNotSupported: { code: -32009, message: 'Version not supported' },
} as const;

export type RpcId = string | number | null;

const sendJson = (res: ServerResponse, status: number, body: string): void => {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

/** `{"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…}}`, HTTP 200 (spec "Endpoints"). */
export const sendRpcError = (res: ServerResponse, id: RpcId, err: { code: number; message: string }): void =>
  sendJson(res, 200, JSON.stringify({ jsonrpc: '2.0', id, error: { code: err.code, message: err.message } }));

export const sendRpcResult = (res: ServerResponse, id: RpcId, result: unknown): void =>
  sendJson(res, 200, JSON.stringify({ jsonrpc: '2.0', id, result }));

/** 1.0 names task states the A2A 1.0 way in JSON-RPC answers (stream frames keep murmur's words). */
const a2aState = (state: string): string =>
  state === 'lost' ? 'TASK_STATE_UNSPECIFIED' : `TASK_STATE_${state.toUpperCase().replace(/-/g, '_')}`;

/** A task as tasks/get and tasks/cancel answer it: id, context_id, status (response on completed). */
export const taskJson = (t: TaskEntry, a2a1 = false): Record<string, unknown> => {
  const status: Record<string, string> = { state: a2a1 ? a2aState(t.state) : t.state, message: t.message };
  if (t.response !== undefined) status.response = t.response;
  return { id: t.taskId, context_id: t.contextId, status };
};

/** The door answers anything but a JSON POST / with a body with 404 Not Found. */
export const sendNotFound = (res: ServerResponse): void => {
  res.writeHead(404, { 'content-length': 0 });
  res.end();
};

/** Door auth refusal: plain HTTP 401 with a JSON `{"error","message"}` body, not JSON-RPC. */
export const sendUnauthorized = (res: ServerResponse): void =>
  sendJson(res, 401, JSON.stringify({ error: 'unauthorized', message: 'missing or invalid door token' }));
