/**
 * A typed, cached view of a logged Murmur frame's data, and the task → context attribution every
 * channel-shaped surface needs (BeeOS channels, Flue conversations). Parsing happens once per record,
 * not once per client. Knows the Murmur frame shapes only; projections into protocols live in adapters.
 */
import type { LogRecord } from './record.js';

export interface FrameView {
  event: string;
  /** The task id (`data.id`) on status/artifact/text/thinking frames. */
  taskId: string | null;
  /** `data.context_id` when the frame carries one (absent on input waits, see spec `status`). */
  contextId: string | null;
  /** status frames */
  state: string | null;
  message: string | null;
  response: string | null;
  final: boolean;
  /** 0.5+: a non-final `working` status that reopens the task for this attempt number. */
  reopen: number | null;
  /** text/thinking chunk text */
  text: string | null;
  /** artifact payload as written */
  artifact: {
    tool_name: string;
    content: string;
    fence_source: string | null;
    tool_call_id: string | null;
    is_error: boolean;
    duration_ms: number | null;
    exit_code: number | null;
    truncated: boolean;
  } | null;
  /** `tool-call-started` / `tool-call-progress` frames (0.6+): the call they announce. */
  toolCall: { toolCallId: string; toolName: string | null; inputBytes: number | null } | null;
}

const TOOL_CALL_EVENTS = new Set(['tool-call-started', 'tool-call-progress']);

const cache = new WeakMap<LogRecord, FrameView | null>();

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The view of a frame record (null for facts and submissions). Cached per record object. */
export const viewFrame = (record: LogRecord): FrameView | null => {
  if (record.kind !== 'frame') return null;
  const hit = cache.get(record);
  if (hit !== undefined) return hit;
  let json: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = JSON.parse(record.data);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      json = parsed as Record<string, unknown>;
  } catch {
    json = null;
  }
  const status =
    json && typeof json.status === 'object' && json.status ? (json.status as Record<string, unknown>) : null;
  const view: FrameView = {
    event: record.event,
    taskId: json ? str(json.id) : null,
    contextId: json ? str(json.context_id) : null,
    state: status ? str(status.state) : null,
    message: status ? str(status.message) : null,
    response: status ? str(status.response) : null,
    final: json?.final === true,
    reopen: record.event === 'status' && typeof json?.reopen === 'number' ? json.reopen : null,
    text: record.event === 'text' || record.event === 'thinking' ? (json ? str(json.text) : null) : null,
    artifact:
      record.event === 'artifact' && json && typeof json.artifact === 'object' && json.artifact
        ? (json.artifact as FrameView['artifact'])
        : null,
    toolCall:
      TOOL_CALL_EVENTS.has(record.event) && json && str(json.tool_call_id)
        ? {
            toolCallId: str(json.tool_call_id)!,
            toolName: str(json.tool_name),
            inputBytes: typeof json.input_bytes === 'number' ? json.input_bytes : null,
          }
        : null,
  };
  // The parsed object itself is not kept: a busy capsule's recent records stay in memory for
  // seconds (the hub's record memory), and every object they hold is copied by each scavenge then
  // promoted; the view keeps only the fields the surfaces read.
  cache.set(record, view);
  return view;
};

/**
 * Attributes records to context ids in log order. Frames without `context_id` (input waits, chunks,
 * artifacts) belong to their task's context, learned from the task's earlier frames; submissions
 * carry their context directly. Feed records in offset order; one tracker per reader.
 */
export class ContextTracker {
  constructor(private readonly taskContext = new Map<string, string>()) {}

  /** The context id the record belongs to, or null when it cannot be attributed (facts, unknown tasks). */
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

  /** Learn a task → context link known from elsewhere (e.g. a submit outcome). */
  link(taskId: string, contextId: string): void {
    this.taskContext.set(taskId, contextId);
  }

  /** An independent copy (a cached projector snapshot must carry what its tracker learned). */
  clone(): ContextTracker {
    return new ContextTracker(new Map(this.taskContext));
  }
}
