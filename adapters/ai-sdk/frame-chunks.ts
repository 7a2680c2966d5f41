/**
 * A capsule task's frames as its turn's chunks (docs/surfaces/ai-sdk.md "A turn, from the log"):
 * text, thinking, tool calls and their outputs, hook artifacts, input requests, steps and the final
 * status. Ids the stream needs are made from log offsets, so every replay of the turn writes the
 * same chunks.
 */
import type { FrameView } from '../../src/log/frame-view.js';
import { DATA_PART } from './chunks.js';
import {
  closeParts,
  closeReasoning,
  closeText,
  emit,
  endTurn,
  failTurn,
  startStep,
  stopTurn,
  toolCallId,
  toolInput,
  type Turn,
} from './turn.js';

const INFERENCE_TURN = /^inference turn (\d+)/;

/** Project one frame of the turn's task (at log offset `at`) into the turn's stream. */
export const frameChunks = (turn: Turn, view: FrameView, at: number): void => {
  if (turn.finished) return;
  if (turn.step === 0) startStep(turn, 1);
  switch (view.event) {
    case 'text': {
      if (!view.text) {
        if (view.final) closeText(turn); // end-of-turn marker
        return;
      }
      closeReasoning(turn);
      if (turn.openText === null) {
        turn.openText = `text-${at}`;
        emit(turn, { type: 'text-start', id: turn.openText });
      }
      emit(turn, { type: 'text-delta', id: turn.openText, delta: view.text });
      turn.wroteText = true;
      if (view.final) closeText(turn);
      return;
    }
    case 'thinking': {
      if (!view.text) return;
      closeText(turn);
      if (turn.openReasoning === null) {
        turn.openReasoning = `reasoning-${at}`;
        emit(turn, { type: 'reasoning-start', id: turn.openReasoning });
      }
      emit(turn, { type: 'reasoning-delta', id: turn.openReasoning, delta: view.text });
      return;
    }
    case 'tool-call-started': {
      // 0.6+: the call is announced before it runs; its artifact brings the output. The capsule
      // streams only the input's size, never its text, so the input is shown as unknown.
      const call = view.toolCall;
      if (!call) return;
      closeParts(turn);
      const id = toolCallId(turn, call.toolCallId, at);
      turn.openTools.set(call.toolCallId, id);
      emit(turn, toolInput(id, call.toolName ?? 'tool'));
      return;
    }
    case 'artifact':
      return artifact(turn, view, at);
    case 'status':
      return status(turn, view, at);
    default:
      return;
  }
};

const artifact = (turn: Turn, view: FrameView, at: number): void => {
  const a = view.artifact;
  if (!a) return;
  closeParts(turn);
  if (a.tool_call_id === null && a.fence_source === null && a.duration_ms === null) {
    // A hook's artifact, not a tool's output.
    emit(turn, {
      type: DATA_PART.artifact,
      id: `artifact-${at}`,
      data: { name: a.tool_name, content: a.content },
    });
    return;
  }
  const given = a.tool_call_id;
  let id = given !== null ? turn.openTools.get(given) : undefined;
  if (id === undefined) {
    // Lines before 0.6 announce nothing: the call and its output arrive together.
    id = toolCallId(turn, given, at);
    emit(turn, toolInput(id, a.tool_name));
  } else turn.openTools.delete(given!);
  emit(
    turn,
    a.is_error
      ? { type: 'tool-output-error', toolCallId: id, errorText: a.content, providerExecuted: true }
      : { type: 'tool-output-available', toolCallId: id, output: a.content, providerExecuted: true },
  );
};

const status = (turn: Turn, view: FrameView, at: number): void => {
  const message = view.message ?? '';
  switch (view.state) {
    case 'working': {
      // A new inference turn (or a reopened attempt, 0.5+) is a new step, once no tool call is
      // waiting for its output (the client looks a tool part up within its step).
      const n = INFERENCE_TURN.exec(message);
      const next = view.reopen !== null || (n !== null && Number(n[1]) !== turn.step);
      if (next && turn.openTools.size === 0) {
        closeParts(turn);
        emit(turn, { type: 'finish-step' });
        startStep(turn, n ? Number(n[1]) : turn.step + 1);
      }
      if (message === 'resumed')
        emit(turn, { type: DATA_PART.input, id: 'input', data: { state: 'answered' } });
      return;
    }
    case 'input-required':
      closeParts(turn);
      emit(turn, { type: DATA_PART.input, id: 'input', data: { prompt: message, state: 'waiting' } });
      return;
    case 'failed':
      if (message === 'input-timeout') {
        // Not the task's end: the waiting tool fails and the task goes on (Murmur §status).
        emit(turn, { type: DATA_PART.input, id: 'input', data: { state: 'timeout' } });
        return;
      }
      return failTurn(turn, message || 'the task failed');
    case 'completed':
      // A reply written only as the final status's response still shows as text.
      if (!turn.wroteText && view.response) {
        closeParts(turn);
        const id = `text-${at}`;
        emit(turn, { type: 'text-start', id });
        emit(turn, { type: 'text-delta', id, delta: view.response });
        emit(turn, { type: 'text-end', id });
      }
      return endTurn(turn, 'stop');
    case 'canceled':
      return stopTurn(turn, message || 'canceled');
    case 'rejected':
      return failTurn(turn, 'the capsule refused the message');
    default:
      return;
  }
};
