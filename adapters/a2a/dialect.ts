/**
 * The two A2A wires one projection is served as (notes: a2a-and-webhooks.md A1/A3). 1.0: method
 * names `SendMessage`…, ProtoJSON (`TASK_STATE_WORKING`, `ROLE_AGENT`, parts `{text}`), stream
 * results `{task}|{statusUpdate}|{artifactUpdate}`. 0.3 (an `A2A-Version: 0.3` header, or none, spec
 * §3.6): `message/send`…, lower-case states and roles, `kind`-tagged objects and a `final` flag.
 */
import type { ArtifactView, StatusView, TaskEvent, TaskProjector, TaskState } from './projection.js';
import { isTerminal } from './projection.js';

export type Dialect = '1.0' | '0.3';

/** The operations, by their 1.0 name. */
export type Operation =
  | 'SendMessage'
  | 'SendStreamingMessage'
  | 'GetTask'
  | 'ListTasks'
  | 'CancelTask'
  | 'SubscribeToTask'
  | 'CreateTaskPushNotificationConfig'
  | 'GetTaskPushNotificationConfig'
  | 'ListTaskPushNotificationConfigs'
  | 'DeleteTaskPushNotificationConfig'
  /** The extended card: not configured, -32007. */
  | 'GetExtendedAgentCard';

const V03: Record<string, Operation> = {
  'message/send': 'SendMessage',
  'message/stream': 'SendStreamingMessage',
  'tasks/get': 'GetTask',
  'tasks/cancel': 'CancelTask',
  'tasks/resubscribe': 'SubscribeToTask',
  'tasks/pushNotificationConfig/set': 'CreateTaskPushNotificationConfig',
  'tasks/pushNotificationConfig/get': 'GetTaskPushNotificationConfig',
  'tasks/pushNotificationConfig/list': 'ListTaskPushNotificationConfigs',
  'tasks/pushNotificationConfig/delete': 'DeleteTaskPushNotificationConfig',
  'agent/getAuthenticatedExtendedCard': 'GetExtendedAgentCard',
};
const V10: ReadonlySet<string> = new Set<Operation>([
  'SendMessage',
  'SendStreamingMessage',
  'GetTask',
  'ListTasks',
  'CancelTask',
  'SubscribeToTask',
  'CreateTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfigs',
  'DeleteTaskPushNotificationConfig',
  'GetExtendedAgentCard',
]);

/** The operation a method names in this dialect, or null (-32601). */
export const operationOf = (dialect: Dialect, method: string): Operation | null =>
  dialect === '1.0' ? (V10.has(method) ? (method as Operation) : null) : (V03[method] ?? null);

/** The dialect of an `A2A-Version` header (absent or empty = 0.3), or null: not offered (-32009). */
export const dialectOf = (header: string | undefined): Dialect | null => {
  const v = (header ?? '').trim();
  if (v === '' || v === '0.3' || /^0\.3\.\d+$/.test(v)) return '0.3';
  if (v === '1.0' || /^1\.0\.\d+$/.test(v)) return '1.0';
  return null;
};

const STATE_10: Record<TaskState, string> = {
  submitted: 'TASK_STATE_SUBMITTED',
  working: 'TASK_STATE_WORKING',
  'input-required': 'TASK_STATE_INPUT_REQUIRED',
  completed: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELED',
  rejected: 'TASK_STATE_REJECTED',
};

/** A 1.0 state name, or a 0.3 one, back to the fold's (ListTasks' `status` filter). */
export const stateFromWire = (v: string): TaskState | null => {
  for (const [k, w] of Object.entries(STATE_10)) if (w === v || k === v) return k as TaskState;
  return null;
};

type Json = Record<string, unknown>;

export class Renderer {
  constructor(private readonly dialect: Dialect) {}

  private text(text: string): Json {
    return this.dialect === '1.0' ? { text } : { kind: 'text', text };
  }

  private message(id: string, role: 'user' | 'agent', text: string, task: TaskProjector): Json {
    const m: Json = {
      messageId: id,
      role: this.dialect === '1.0' ? (role === 'user' ? 'ROLE_USER' : 'ROLE_AGENT') : role,
      parts: [this.text(text)],
      taskId: task.taskId,
      contextId: task.meta?.contextId ?? '',
    };
    return this.dialect === '1.0' ? m : { kind: 'message', ...m };
  }

  private status(s: StatusView, task: TaskProjector): Json {
    return {
      state: this.dialect === '1.0' ? STATE_10[s.state] : s.state,
      ...(s.message ? { message: this.message(s.message.id, 'agent', s.message.text, task) } : {}),
      timestamp: s.timestamp,
    };
  }

  private artifact(a: ArtifactView, text: string): Json {
    return {
      artifactId: a.artifactId,
      ...(a.name !== undefined ? { name: a.name } : {}),
      parts: [this.text(text)],
      ...(a.metadata ? { metadata: a.metadata } : {}),
    };
  }

  /** The Task object (bare: GetTask, CancelTask, ListTasks' items). */
  task(t: TaskProjector): Json {
    const m = t.meta;
    const body: Json = {
      id: t.taskId,
      contextId: m?.contextId ?? '',
      status: this.status(t.status, t),
      artifacts: [...t.artifacts.values()].map((a) => this.artifact(a, a.text)),
      history: m ? [this.message(m.messageId, 'user', m.text, t)] : [],
    };
    return this.dialect === '1.0' ? body : { kind: 'task', ...body };
  }

  /** SendMessage's result: 1.0 wraps it (`{task}`), 0.3 answers the Task itself. */
  sendResult(t: TaskProjector): Json {
    return this.dialect === '1.0' ? { task: this.task(t) } : this.task(t);
  }

  /** One streamed event's `result`. */
  event(t: TaskProjector, e: TaskEvent): Json {
    const ids = { taskId: t.taskId, contextId: t.meta?.contextId ?? '' };
    if (e.type === 'task') return this.dialect === '1.0' ? { task: this.task(t) } : this.task(t);
    if (e.type === 'status') {
      const u = { ...ids, status: this.status(e.status, t) };
      return this.dialect === '1.0'
        ? { statusUpdate: u }
        : { kind: 'status-update', ...u, final: isTerminal(e.status.state) };
    }
    const u = {
      ...ids,
      artifact: this.artifact(e.artifact, e.chunk),
      append: e.append,
      lastChunk: e.lastChunk,
    };
    return this.dialect === '1.0' ? { artifactUpdate: u } : { kind: 'artifact-update', ...u };
  }
}
