/**
 * Recognising the task a submit started: its first frame (a `working` status carrying the context id
 * we sent), seen on the submit connection or on the capsule's watch. Sending is capsule-client.ts's.
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

/** The task id when `frame` is the first frame of the task submitted with `contextId`. */
export const ownStart = (frame: SseFrame, contextId: string): string | null => {
  if (frame.event !== 'status') return null;
  const data = parseObject(frame.data);
  const status = data?.status as { state?: unknown } | undefined;
  return status?.state === 'working' && data?.context_id === contextId && typeof data.id === 'string'
    ? data.id
    : null;
};

/** Our task's first frame as seen on the watch, remembered until someone asks. */
export class WatchTap {
  private first: string | null = null;
  private listener: ((taskId: string) => void) | null = null;
  private readonly unsubscribe: (() => void) | null;

  constructor(contextId: string, source?: (listener: (frame: SseFrame) => void) => () => void) {
    this.unsubscribe =
      source?.((frame) => {
        const taskId = this.first === null ? ownStart(frame, contextId) : null;
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
