/**
 * One attempt of a scripted task: the agent loop's frames in order, each id taken from the counter
 * the spec's "Event ids" table names, at write time. Queueing, cancel and reopen live in tasks.ts.
 */
import { Counter, INPUT_WAIT_COUNTER_START } from './ids.js';
import {
  artifactFrame,
  statusFrame,
  textFrame,
  thinkingFrame,
  toolCallProgressFrame,
  toolCallStartedFrame,
  type ArtifactFields,
  type Frame,
  type TaskState,
} from './frames.js';
import type { Script } from './script.js';

export interface AttemptContext {
  taskId: string;
  contextId: string;
  /** The task's counter for this attempt (from 0). */
  counter: Counter;
  /** The session's chunk counter. */
  chunk: Counter;
  /** Pace, then build the frame (its id is drawn now) and broadcast it; throws once canceled. */
  emit(build: () => Frame): Promise<void>;
  /** An abortable wait (an input wait's answer time). */
  wait(ms: number): Promise<void>;
  /** Wait until canceled (the `hold` script); never resolves. */
  hold(): Promise<void>;
  setState(state: TaskState | 'submitted', message: string): void;
  /** The number of this attempt's first inference turn (1; 0.6+ keeps counting across a reopen). */
  firstTurn: number;
  /** 0.5+: end a completed attempt with a non-final `working` status carrying this reopen number. */
  reopenAs: number | null;
  /** 0.5+: one final per task, so the input-timeout `failed` status is written final:false. */
  oneFinal: boolean;
  /** 0.6+: `tool-call-started` and `tool-call-progress` before each tool's artifact. */
  toolCallFrames: boolean;
}

export interface AttemptOutcome {
  state: 'completed' | 'failed';
  message: string;
  response?: string;
}

const fenced = (tool: string, body: string): string =>
  `<untrusted-content source=tool:${tool}>\n${body}\n</untrusted-content>`;

/** The artifact of the n-th tool call (deterministic, so a reopened attempt repeats it byte for byte). */
const toolArtifact = (n: number, fail: boolean): ArtifactFields => {
  const callId = `toolu_${String(n).padStart(2, '0')}`;
  if (fail) {
    const tool = 'jsonl-line-count';
    const body = `failed to read '{"data":"missing-${n}.jsonl"}': No such file or directory (os error 44)`;
    return {
      tool_name: tool,
      content: fenced(tool, body),
      fence_source: `tool:${tool}`,
      tool_call_id: callId,
      is_error: true,
      duration_ms: 5,
      exit_code: null,
      truncated: false,
    };
  }
  const body = `$ echo tool-${n}\nExit code: 0\nStdout:\ntool-${n}\n\nStderr:\n`;
  return {
    tool_name: 'bash',
    content: fenced('bash', body),
    fence_source: 'tool:bash',
    tool_call_id: callId,
    is_error: false,
    duration_ms: 12,
    exit_code: 0,
    truncated: false,
  };
};

/** A tool calls `request-input`: input-wait counter from 2^63-1, answered or timed out. */
const inputWait = async (script: Script, ctx: AttemptContext): Promise<void> => {
  const input = script.input;
  if (!input) return;
  const { taskId } = ctx;
  const waitIds = new Counter(INPUT_WAIT_COUNTER_START);
  const tool = 'ask-user';
  await ctx.emit(() =>
    statusFrame({ taskId, contextId: null, state: 'input-required', message: input.prompt }, waitIds.next()),
  );
  ctx.setState('input-required', input.prompt);
  await ctx.wait(input.afterMs);
  const answered = input.outcome === 'answer';
  const state = answered ? 'working' : 'failed';
  const message = answered ? 'resumed' : 'input-timeout';
  // `failed` input-timeout is final:true, yet the task goes on (spec "status", second table); from
  // 0.5 only the task's last status is final, so there it is final:false.
  const final = ctx.oneFinal ? false : undefined;
  await ctx.emit(() => statusFrame({ taskId, contextId: null, state, message, final }, waitIds.next()));
  ctx.setState('working', message);
  const body = answered ? `answer to: ${input.prompt}` : `request-input timed out after ${input.afterMs} ms`;
  const artifact: ArtifactFields = {
    tool_name: tool,
    content: fenced(tool, body),
    fence_source: `tool:${tool}`,
    tool_call_id: 'toolu_input',
    is_error: !answered,
    duration_ms: input.afterMs,
    exit_code: null,
    truncated: false,
  };
  await ctx.emit(() => artifactFrame(taskId, artifact, ctx.counter.next()));
};

/** 0.6+: the model starts a tool call, then its input has streamed (deterministic byte count). */
const toolCallFrames = async (ctx: AttemptContext, artifact: ArtifactFields, n: number): Promise<void> => {
  const callId = artifact.tool_call_id ?? `toolu_${n}`;
  const inputBytes = JSON.stringify({ command: `echo tool-${n}` }).length;
  await ctx.emit(() => toolCallStartedFrame(ctx.taskId, callId, artifact.tool_name, ctx.counter.next()));
  await ctx.emit(() => toolCallProgressFrame(ctx.taskId, callId, inputBytes, ctx.counter.next()));
};

/** Run one attempt of a script and return how it ended (cancel surfaces as a thrown abort). */
export const runAttempt = async (script: Script, ctx: AttemptContext): Promise<AttemptOutcome> => {
  const { taskId, contextId, counter, chunk } = ctx;
  const streaming = script.reply === null;
  for (let i = 0; i < script.startChunks; i++) {
    await ctx.emit(() => textFrame(taskId, `start ${i + 1}`, false, chunk.next()));
  }
  for (let turn = 1; turn <= script.turns; turn++) {
    const message = `inference turn ${ctx.firstTurn + turn - 1}`;
    await ctx.emit(() => statusFrame({ taskId, contextId, state: 'working', message }, counter.next()));
    ctx.setState('working', message);
    if (script.hold && turn === 1) await ctx.hold();
    // Inference call: the chunk counter starts from the task's counter, which takes it back after.
    chunk.value = counter.value;
    if (turn === 1) {
      for (const t of script.thinking) await ctx.emit(() => thinkingFrame(taskId, t, chunk.next()));
    }
    if (turn === script.turns) {
      for (const c of script.chunks) await ctx.emit(() => textFrame(taskId, c, false, chunk.next()));
    }
    if (streaming) await ctx.emit(() => textFrame(taskId, '', true, chunk.next()));
    counter.value = chunk.value;
    if (turn === 1) {
      await inputWait(script, ctx);
      for (let n = 1; n <= script.tools; n++) {
        const artifact = toolArtifact(n, script.toolError);
        if (ctx.toolCallFrames) await toolCallFrames(ctx, artifact, n);
        await ctx.emit(() => artifactFrame(taskId, artifact, counter.next()));
      }
    }
  }
  if (script.fail !== null) {
    const fail = script.fail;
    await ctx.emit(() => statusFrame({ taskId, contextId, state: 'failed', message: fail }, counter.next()));
    return { state: 'failed', message: fail };
  }
  if (!streaming && script.response !== '') {
    // Whole reply: numbered from the chunk counter, i.e. the same value as the task counter now.
    await ctx.emit(() => textFrame(taskId, script.response, true, chunk.next()));
  }
  const response = script.response;
  const reopen = ctx.reopenAs;
  if (reopen !== null) {
    // 0.5+: the on-task-end hook runs before the final is written; reopening writes this instead.
    const message = 'reopened by on-task-end hook';
    await ctx.emit(() =>
      statusFrame({ taskId, contextId, state: 'working', message, reopen }, counter.next()),
    );
    return { state: 'completed', message, response };
  }
  await ctx.emit(() =>
    statusFrame(
      { taskId, contextId, state: 'completed', message: 'session ended', response },
      counter.next(),
    ),
  );
  return { state: 'completed', message: 'session ended', response };
};
