/** What an A2A client holds of a task, built from `@a2a-js/sdk` 1.3.0 stream events or a Task. */
import { Role, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';

type StreamEvent = Awaited<ReturnType<AsyncGenerator<Parameters<typeof apply>[1]>['next']>>['value'];
type SdkTask = Awaited<ReturnType<Client['getTask']>>;
type SdkPart = NonNullable<SdkTask['artifacts']>[number]['parts'][number];

export interface TaskModel {
  id: string;
  contextId: string;
  state: TaskState;
  /** artifactId → its text so far. */
  artifacts: Map<string, string>;
  events: string[];
}

export const emptyModel = (): TaskModel => ({
  id: '',
  contextId: '',
  state: TaskState.TASK_STATE_UNSPECIFIED,
  artifacts: new Map(),
  events: [],
});

const textOf = (parts: readonly SdkPart[]): string =>
  parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

/** The model of a Task object (a snapshot, GetTask). */
export const fromTask = (t: SdkTask, into: TaskModel = emptyModel()): TaskModel => {
  into.id = t.id;
  into.contextId = t.contextId;
  into.state = t.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
  into.artifacts = new Map(t.artifacts.map((a) => [a.artifactId, textOf(a.parts)]));
  return into;
};

/** Fold one stream event into the model. */
export const apply = (
  m: TaskModel,
  ev: { payload?: { $case: string; value: unknown } | undefined },
): TaskModel => {
  const p = ev.payload;
  if (!p) return m;
  m.events.push(p.$case);
  if (p.$case === 'task') return fromTask(p.value as SdkTask, m);
  if (p.$case === 'statusUpdate') {
    const v = p.value as { status?: { state: TaskState } };
    if (v.status) m.state = v.status.state;
  }
  if (p.$case === 'artifactUpdate') {
    const v = p.value as { artifact?: { artifactId: string; parts: SdkPart[] }; append: boolean };
    if (v.artifact) {
      const prior = v.append ? (m.artifacts.get(v.artifact.artifactId) ?? '') : '';
      m.artifacts.set(v.artifact.artifactId, prior + textOf(v.artifact.parts));
    }
  }
  return m;
};

export type { StreamEvent };

/** A user message as the SDK takes it (ts-proto objects: numeric role, `content.$case` parts). */
export const userMessage = (text: string, contextId?: string) =>
  ({
    message: {
      messageId: `m-${Math.random().toString(36).slice(2)}`,
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: text } }],
      ...(contextId ? { contextId } : {}),
    },
  }) as unknown as Parameters<Client['sendMessage']>[0];

export const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);
