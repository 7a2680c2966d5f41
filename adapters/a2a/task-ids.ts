/**
 * A2A task ids the surface mints: a UUID, a dot, then the client's context id (base64url). GetTask
 * and the rest name only the task, and the context says where in the log it is (the per-context
 * index), without an index of task ids. The context is namespaced by the caller's owner before it
 * is read, so another owner's task id finds nothing.
 */
import { randomUUID } from 'node:crypto';

export const mintTaskId = (contextId: string): string =>
  `${randomUUID()}.${Buffer.from(contextId, 'utf8').toString('base64url')}`;

const SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.([A-Za-z0-9_-]+)$/;

/** The client context id a task id names, or null: not one of ours. */
export const contextOfTask = (taskId: string): string | null => {
  const m = SHAPE.exec(taskId);
  if (!m?.[1]) return null;
  const ctx = Buffer.from(m[1], 'base64url').toString('utf8');
  return ctx !== '' && mintTaskIdContextOk(ctx) ? ctx : null;
};

/** Context ids a client may name: printable, bounded (they become log context ids). */
export const CONTEXT_ID = /^[\x21-\x7e]{1,128}$/;
const mintTaskIdContextOk = (ctx: string): boolean => CONTEXT_ID.test(ctx);
