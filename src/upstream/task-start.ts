/**
 * Recognising the task a submit started: its first frame (`working` "inference turn 1", id 0, carrying
 * the context id we sent), seen on the submit connection or on the capsule's watch. Sending is capsule-client.ts's.
 */
import type { SseFrame } from './sse-frames.js';

const parseObject = (text: string): Record<string, unknown> | null => {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
};

/**
 * Finds the task a submit started. A task's first frame is its `working` "inference turn 1" status
 * carrying our context id. A context may already have
 * a task running (a conversation's earlier turn): its frames carry the same context id, so any task
 * seen doing anything else first is someone else's and is never taken for ours. One detector per
 * submit, shared by the submit connection and the watch, which see the same tasks.
 */
class StartDetector {
  private readonly foreign = new Set<string>();

  constructor(private readonly contextId: string) {}

  /** The task id when `frame` is the first frame of the task submitted with our context id. */
  consider(frame: SseFrame): string | null {
    const data = parseObject(frame.data);
    const taskId = typeof data?.id === 'string' ? data.id : null;
    if (taskId === null || this.foreign.has(taskId)) return null;
    const status = data?.status as { state?: unknown; message?: unknown } | undefined;
    // Its id is 0 on the spec's line and the next of the session's sequence from 0.4; a 0.5+ reopen
    // says `reopen` (on the spec's line a reopen is a task already seen, so never a start here).
    const isStart =
      frame.event === 'status' &&
      data?.reopen === undefined &&
      status?.state === 'working' &&
      status.message === 'inference turn 1' &&
      data?.context_id === this.contextId;
    if (isStart) return taskId;
    this.foreign.add(taskId);
    return null;
  }
}

/** Our task's first frame as seen on the watch, remembered until someone asks. */
export class WatchTap {
  private first: string | null = null;
  private listener: ((taskId: string) => void) | null = null;
  private readonly unsubscribe: (() => void) | null;
  readonly detector: StartDetector;

  constructor(contextId: string, source?: (listener: (frame: SseFrame) => void) => () => void) {
    this.detector = new StartDetector(contextId);
    this.unsubscribe =
      source?.((frame) => {
        const taskId = this.first === null ? this.detector.consider(frame) : null;
        if (taskId === null) return;
        this.first = taskId;
        this.listener?.(taskId);
      }) ?? null;
  }

  get active(): boolean {
    return this.unsubscribe !== null;
  }

  onStart(listener: (taskId: string) => void): void {
    this.listener = listener;
    if (this.first !== null) listener(this.first);
  }

  close(): void {
    this.unsubscribe?.();
  }
}
