/**
 * Task → context attribution, the same rule as src/log/frame-view.ts's ContextTracker (frames
 * without `context_id` belong to their task's context, learned from its earlier frames), but
 * copyable: a cached projector snapshot must carry what its tracker learned.
 */
import { viewFrame } from '../../src/log/frame-view.js';
import type { LogRecord } from '../../src/log/record.js';

export class TaskContexts {
  constructor(private readonly taskContext = new Map<string, string>()) {}

  /** The context id the record belongs to, or null (facts, frames of tasks never attributed). */
  contextOf(record: LogRecord): string | null {
    if (record.kind === 'submission') return record.contextId;
    const view = viewFrame(record);
    if (!view || !view.taskId) return null;
    if (view.contextId) {
      this.taskContext.set(view.taskId, view.contextId);
      return view.contextId;
    }
    return this.taskContext.get(view.taskId) ?? null;
  }

  link(taskId: string, contextId: string): void {
    this.taskContext.set(taskId, contextId);
  }

  clone(): TaskContexts {
    return new TaskContexts(new Map(this.taskContext));
  }
}
