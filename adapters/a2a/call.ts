/** One JSON-RPC call as the methods see it, and what they answer with. */
import { ownerContext } from '../../src/auth/namespace.js';
import type { Principal } from '../../src/auth/principal.js';
import type { GatewayCore } from '../../src/core/types.js';
import type { Dialect, Renderer } from './dialect.js';
import { taskNotFound, type RpcId } from './errors.js';
import type { TaskProjector } from './projection.js';
import { readTask } from './task-reader.js';
import { contextOfTask } from './task-ids.js';

export interface Call {
  capsule: string;
  principal: Principal;
  dialect: Dialect;
  render: Renderer;
  id: RpcId;
  params: Record<string, unknown>;
  lastEventId: string | undefined;
}

export const record = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

export const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
  });

export const result = (call: Call, value: unknown): Response =>
  json({ jsonrpc: '2.0', id: call.id, result: value });

/** The task a call names, folded to the head (-32001 when it is not the caller's). */
export const lookup = async (
  core: GatewayCore,
  call: Call,
  taskId: string,
): Promise<{ task: TaskProjector; logContext: string }> => {
  const ctx = contextOfTask(taskId);
  if (ctx === null) throw taskNotFound();
  const logContext = ownerContext(call.principal, ctx);
  const task = await readTask(core, call.capsule, logContext, taskId);
  if (!task || task.meta?.owner !== call.principal.owner) throw taskNotFound();
  return { task, logContext };
};
