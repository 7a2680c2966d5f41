/**
 * Byte-exact frame encoding and the JSON payload of every frame kind (spec "Frame format" and the
 * per-frame sections). Key order follows the spec; who writes which frame is left to the runner.
 */

/** An encoded frame. `id` is null on frames that carry no `id:` line. */
export interface Frame {
  event: string;
  id: bigint | null;
  data: string;
  /** The bytes on the wire: `id: N\nevent: T\ndata: D\n\n` (id line only when id is set). */
  bytes: string;
  /** A `status` frame with `"final":true` (what closes a live `message/stream`). */
  final: boolean;
}

/** The heartbeat comment: stands alone between blank lines, never a frame. */
export const HEARTBEAT = ':heartbeat\n\n';

/** Encode one frame; `data` is written as given (the `error` frame relies on that: no escaping). */
export const encodeFrame = (event: string, data: string, id: bigint | null = null, final = false): Frame => {
  const idLine = id === null ? '' : `id: ${id.toString()}\n`;
  return { event, id, data, bytes: `${idLine}event: ${event}\ndata: ${data}\n\n`, final };
};

export type TaskState = 'working' | 'input-required' | 'completed' | 'failed' | 'canceled' | 'rejected';

export interface StatusFields {
  taskId: string;
  /** Omitted on `input-required`, `working` "resumed" and `failed` "input-timeout" (spec "status"). */
  contextId: string | null;
  state: TaskState;
  message: string;
  /** Present only on `completed`. */
  response?: string;
  /** 0.5+: a reopen is a `working` status with this attempt number (written after `final`). */
  reopen?: number;
  /** 0.5+ overrides the state's finality (one final per task: an input-timeout is not final). */
  final?: boolean;
}

const FINAL_STATES: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'canceled', 'rejected']);

/** A `status` frame: keys `id`, `context_id`?, `status{state,message,response?}`, `final`. */
export const statusFrame = (f: StatusFields, id: bigint | null): Frame => {
  const status: Record<string, string> = { state: f.state, message: f.message };
  if (f.state === 'completed') status.response = f.response ?? '';
  const body: Record<string, unknown> = { id: f.taskId };
  if (f.contextId !== null) body.context_id = f.contextId;
  body.status = status;
  const final = f.final ?? FINAL_STATES.has(f.state);
  body.final = final;
  if (f.reopen !== undefined) body.reopen = f.reopen;
  return encodeFrame('status', JSON.stringify(body), id, final);
};

/** Every key of `artifact`, present in the spec's order; null where it does not apply. */
export interface ArtifactFields {
  tool_name: string;
  content: string;
  fence_source: string | null;
  tool_call_id: string | null;
  is_error: boolean;
  duration_ms: number | null;
  exit_code: number | null;
  truncated: boolean;
}

/** An `artifact` frame; the object is rebuilt so key order never depends on the caller. */
export const artifactFrame = (taskId: string, a: ArtifactFields, id: bigint): Frame => {
  const artifact = {
    tool_name: a.tool_name,
    content: a.content,
    fence_source: a.fence_source,
    tool_call_id: a.tool_call_id,
    is_error: a.is_error,
    duration_ms: a.duration_ms,
    exit_code: a.exit_code,
    truncated: a.truncated,
  };
  return encodeFrame('artifact', JSON.stringify({ id: taskId, artifact }), id);
};

/** 0.6+: `tool-call-started`, written before the tool runs (`id` is the task's `tsk_` id). */
export const toolCallStartedFrame = (
  taskId: string,
  toolCallId: string,
  toolName: string,
  id: bigint,
): Frame =>
  encodeFrame(
    'tool-call-started',
    JSON.stringify({ id: taskId, tool_call_id: toolCallId, tool_name: toolName }),
    id,
  );

/** 0.6+: `tool-call-progress`, how many bytes of the tool's input the model has streamed. */
export const toolCallProgressFrame = (
  taskId: string,
  toolCallId: string,
  inputBytes: number,
  id: bigint,
): Frame =>
  encodeFrame(
    'tool-call-progress',
    JSON.stringify({ id: taskId, tool_call_id: toolCallId, input_bytes: inputBytes }),
    id,
  );

/** A `text` frame: a chunk (final false), the end of a turn's chunks (`""`, true) or a whole reply. */
export const textFrame = (taskId: string, text: string, final: boolean, id: bigint): Frame =>
  encodeFrame('text', JSON.stringify({ id: taskId, text, final }), id);

/** A `thinking` frame: `final` is always false. */
export const thinkingFrame = (taskId: string, text: string, id: bigint): Frame =>
  encodeFrame('thinking', JSON.stringify({ id: taskId, text, final: false }), id);

/** `gap`: no id line; names the oldest buffered id. */
export const gapFrame = (firstAvailableId: bigint): Frame =>
  encodeFrame('gap', `{"first_available_id":${firstAvailableId.toString()}}`);

/** `connection-ack`: the first frame of every `stream/watch`. */
export const connectionAckFrame = (mode: 'stateless' | 'threaded'): Frame =>
  encodeFrame('connection-ack', JSON.stringify({ role: 'observer', conversation_mode: mode }));

/** `capsule-closed`: empty object, last frame of a watch whose capsule closed its stream. */
export const capsuleClosedFrame = (): Frame => encodeFrame('capsule-closed', '{}');

/**
 * `error`: the message is spliced in WITHOUT escaping (spec "error"), so a parse error quoting a
 * value (`invalid type: string "x", …`) yields invalid JSON on purpose.
 */
export const errorFrame = (message: string): Frame => encodeFrame('error', `{"error":"${message}"}`);
