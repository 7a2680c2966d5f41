/**
 * One A2A task folded from its context's log records. A task is a submission the A2A surface queued
 * (its `meta.a2a.taskId`); the capsule's own task id is learned from the queue's
 * `submission-started` fact, and its frames then become status and artifact updates. The fold is
 * wire-neutral: `dialect.ts` renders it as A2A 1.0 or 0.3. Each record yields at most one event, so
 * a record's offset names the event it made (the SSE `id:` cursor).
 */
import type { LogRecord } from '../../src/log/record.js';

export type TaskState =
  'submitted' | 'working' | 'input-required' | 'completed' | 'failed' | 'canceled' | 'rejected';

const TERMINAL: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'canceled', 'rejected']);
export const isTerminal = (s: TaskState): boolean => TERMINAL.has(s);

/** What the A2A surface keeps in its submission record's `meta.a2a`. */
export interface A2aMeta {
  taskId: string;
  /** The context id as the client named it (the log's is namespaced by owner). */
  contextId: string;
  /** The client's own message id. */
  messageId: string;
  text: string;
}

export interface ArtifactView {
  artifactId: string;
  name?: string;
  text: string;
  metadata?: Record<string, unknown>;
}

export interface StatusView {
  state: TaskState;
  /** The agent's words on it (the capsule's status message, a completed task's response, a loss). */
  message: { id: string; text: string } | null;
  timestamp: string;
}

export type TaskEvent =
  | { type: 'task' }
  | { type: 'status'; status: StatusView }
  | { type: 'artifact'; artifact: ArtifactView; chunk: string; append: boolean; lastChunk: boolean };

const CAPSULE_STATE: Record<string, TaskState> = {
  working: 'working',
  'input-required': 'input-required',
  completed: 'completed',
  failed: 'failed',
  canceled: 'canceled',
  rejected: 'rejected',
};

/** Artifact ids of the streamed reply and reasoning: one artifact each, appended chunk by chunk. */
const RESPONSE_ARTIFACT = 'response';
const THINKING_ARTIFACT = 'thinking';

const parse = (data: string): Record<string, unknown> | null => {
  try {
    const v: unknown = JSON.parse(data);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
};

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export const a2aMetaOf = (record: LogRecord): (A2aMeta & { owner: string | null }) | null => {
  if (record.kind !== 'submission' || record.protocol !== 'a2a') return null;
  const m = record.meta?.a2a as Partial<A2aMeta> | undefined;
  if (!m || typeof m.taskId !== 'string') return null;
  return {
    taskId: m.taskId,
    contextId: str(m.contextId) ?? '',
    messageId: str(m.messageId) ?? '',
    text: str(m.text) ?? record.text,
    owner: record.owner,
  };
};

export class TaskProjector {
  /** The submission, once its record was folded (null: not in what was read: no such task). */
  meta: (A2aMeta & { owner: string | null; submissionId: string; at: string }) | null = null;
  capsuleTaskId: string | null = null;
  status: StatusView = { state: 'submitted', message: null, timestamp: new Date(0).toISOString() };
  readonly artifacts = new Map<string, ArtifactView>();
  /** The offset through which records were folded. */
  cursor = 0;

  constructor(readonly taskId: string) {}

  get terminal(): boolean {
    return isTerminal(this.status.state);
  }

  apply(record: LogRecord): TaskEvent | null {
    if (record.offset > this.cursor) this.cursor = record.offset;
    const at = new Date(record.receivedAt).toISOString();
    if (record.kind === 'submission') {
      const m = a2aMetaOf(record);
      if (!m || m.taskId !== this.taskId || this.meta) return null;
      this.meta = { ...m, submissionId: record.messageId, at };
      this.status = { state: 'submitted', message: null, timestamp: at };
      return { type: 'task' };
    }
    if (!this.meta) return null;
    if (record.kind === 'fact') {
      switch (record.fact) {
        case 'submission-started':
          if (record.messageId === this.meta.submissionId) this.capsuleTaskId = record.taskId;
          return null;
        case 'submission-withdrawn':
          if (record.messageId !== this.meta.submissionId || this.terminal) return null;
          return this.setStatus(
            record.outcome === 'aborted' ? 'canceled' : 'failed',
            record.reason,
            record.offset,
            at,
          );
        case 'frames-possibly-missing':
          // A loss is said, in its place, as a status update: never a silent hole.
          if (this.capsuleTaskId === null || this.terminal) return null;
          return this.setStatus(
            this.status.state,
            `frames may be missing here (${record.reason})`,
            record.offset,
            at,
          );
        default:
          return null;
      }
    }
    if (this.capsuleTaskId === null || this.terminal) return null;
    const d = parse(record.data);
    if (!d || d.id !== this.capsuleTaskId) return null;
    switch (record.event) {
      case 'status': {
        const s = (d.status ?? {}) as Record<string, unknown>;
        const state = CAPSULE_STATE[str(s.state) ?? ''];
        if (!state) return null;
        const text = state === 'completed' ? (str(s.response) ?? str(s.message)) : str(s.message);
        return this.setStatus(state, text, record.offset, at);
      }
      case 'text':
      case 'thinking': {
        const chunk = str(d.text) ?? '';
        if (chunk === '') return null; // a turn's end marker says nothing
        const id = record.event === 'text' ? RESPONSE_ARTIFACT : THINKING_ARTIFACT;
        const prior = this.artifacts.get(id);
        const artifact: ArtifactView = { artifactId: id, name: id, text: (prior?.text ?? '') + chunk };
        this.artifacts.set(id, artifact);
        return { type: 'artifact', artifact, chunk, append: prior !== undefined, lastChunk: false };
      }
      case 'artifact': {
        const a = (d.artifact ?? {}) as Record<string, unknown>;
        const { tool_name, content, ...rest } = a;
        const artifact: ArtifactView = {
          artifactId: `tool-${record.offset}`,
          ...(typeof tool_name === 'string' ? { name: tool_name } : {}),
          text: str(content) ?? '',
          metadata: rest,
        };
        this.artifacts.set(artifact.artifactId, artifact);
        return { type: 'artifact', artifact, chunk: artifact.text, append: false, lastChunk: true };
      }
      default:
        return null;
    }
  }

  private setStatus(state: TaskState, text: string | null, offset: number, at: string): TaskEvent {
    this.status = {
      state,
      message: text ? { id: `${this.taskId}-${offset}`, text } : null,
      timestamp: at,
    };
    return { type: 'status', status: this.status };
  }
}
