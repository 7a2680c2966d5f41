/**
 * One turn of a chat: the user message and the UI message stream of its assistant reply, from
 * `start` to `finish`, with the writers that keep a turn's stream well formed (a part is ended
 * before another starts, a step before the turn finishes). Which record writes what is the
 * projection's (projection.ts, frame-chunks.ts).
 */
import { applyChunk, type FinishReason, type UiChunk, type UiMessage, type UiPart } from './chunks.js';

export interface Turn {
  /** The A2A messageId the capsule received (the submission record's). */
  submissionMessageId: string;
  userMessage: UiMessage;
  assistantId: string;
  /** The turn's stream so far, from its `start`. */
  chunks: UiChunk[];
  parts: UiPart[];
  taskId: string | null;
  finished: boolean;
  /** Parts opened and not yet ended, by stream-local id. */
  openText: string | null;
  openReasoning: string | null;
  openParts: Map<string, { state?: 'streaming' | 'done'; text: string }>;
  /** Tool calls announced (input available) and still without output: capsule id → stream id. */
  openTools: Map<string, string>;
  toolIds: Set<string>;
  wroteText: boolean;
  /** The inference turn the current step is (capsule `working` "inference turn N"). */
  step: number;
  /** Handed to the capsule by the queue (`submission-handed`), not returned since. */
  handed: boolean;
  /** Withdrawn while handed: it ends by its task's final status, or here if it comes back. */
  withdrawn: { outcome: 'aborted' | 'failed'; reason: string } | null;
}

/** A turn whose stream is its `start`. */
export const newTurn = (submissionMessageId: string, userMessage: UiMessage, assistantId: string): Turn => {
  const turn: Turn = {
    submissionMessageId,
    userMessage,
    assistantId,
    chunks: [],
    parts: [],
    taskId: null,
    finished: false,
    openText: null,
    openReasoning: null,
    openParts: new Map(),
    openTools: new Map(),
    toolIds: new Set(),
    wroteText: false,
    step: 0,
    handed: false,
    withdrawn: null,
  };
  emit(turn, { type: 'start', messageId: assistantId });
  return turn;
};

export const emit = (turn: Turn, chunk: UiChunk): void => {
  turn.chunks.push(chunk);
  applyChunk(turn.parts, turn.openParts, chunk);
};

export const toolInput = (toolCallId: string, toolName: string): UiChunk => ({
  type: 'tool-input-available',
  toolCallId,
  toolName,
  input: {},
  dynamic: true,
  providerExecuted: true,
});

/** The capsule's call id unless this turn already used it (then one unique to the record). */
export const toolCallId = (turn: Turn, given: string | null, at: number): string => {
  const id = given !== null && !turn.toolIds.has(given) ? given : `call-${at}`;
  turn.toolIds.add(id);
  return id;
};

export const startStep = (turn: Turn, step: number): void => {
  turn.step = step;
  emit(turn, { type: 'start-step' });
};

export const closeText = (turn: Turn): void => {
  if (turn.openText === null) return;
  emit(turn, { type: 'text-end', id: turn.openText });
  turn.openText = null;
};

export const closeReasoning = (turn: Turn): void => {
  if (turn.openReasoning === null) return;
  emit(turn, { type: 'reasoning-end', id: turn.openReasoning });
  turn.openReasoning = null;
};

export const closeParts = (turn: Turn): void => {
  closeText(turn);
  closeReasoning(turn);
};

export const endTurn = (turn: Turn, reason: FinishReason): void => {
  closeParts(turn);
  if (turn.step > 0) emit(turn, { type: 'finish-step' });
  emit(turn, { type: 'finish', finishReason: reason });
  turn.finished = true;
};

/** The turn ends in an `error` chunk (the client's status becomes `error`, with this text). */
export const failTurn = (turn: Turn, errorText: string): void => {
  closeParts(turn);
  emit(turn, { type: 'error', errorText });
  endTurn(turn, 'error');
};

/** Stopped (a stop request, a cancel): the reply so far stands. */
export const stopTurn = (turn: Turn, reason: string): void => {
  closeParts(turn);
  emit(turn, { type: 'abort', reason });
  endTurn(turn, 'other');
};
