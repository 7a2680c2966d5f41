/**
 * Task scripts, chosen by the message text: plain text → the default echo script; `#sim {json}` →
 * an explicit script (grammar in the simulator API doc). Only parsing lives here; tasks.ts runs it.
 */

export interface InputSpec {
  prompt: string;
  outcome: 'answer' | 'timeout';
  afterMs: number;
}

export interface Script {
  /** Inference turns (at least 2 when tools or an input wait need a turn after them). */
  turns: number;
  /** Thinking chunks streamed during turn 1. */
  thinking: string[];
  /** Reply chunks streamed during the last turn (streaming driver). */
  chunks: string[];
  /** A whole reply written as one `text` final:true (non-streaming driver), or null. */
  reply: string | null;
  tools: number;
  toolError: boolean;
  fail: string | null;
  input: InputSpec | null;
  reopen: boolean;
  delayMs: number | null;
  /** Write `working` "inference turn 1", then nothing more until tasks/cancel (so the task is visibly running). */
  hold: boolean;
  /** Write frames back to back without yielding between them: a burst, as a busy capsule emits one. */
  burst: boolean;
  /** Extension: chunks a start hook emits before turn 1, numbered from the chunk counter as it stands. */
  startChunks: number;
  /** The task's result text (`status.response` on completed). */
  response: string;
}

const SIM_PREFIX = '#sim ';

/** Split a reply into a few chunks at word starts ("Echo: a b" → ["Echo:", " a", " b"]). */
const splitReply = (reply: string): string[] => {
  const parts = reply.match(/\s*\S+/g) ?? [];
  const tail = reply.slice(parts.join('').length);
  if (tail && parts.length > 0) parts[parts.length - 1] += tail;
  return parts.length > 0 ? parts : [reply];
};

/** The default script: one turn, one thinking chunk, `Echo: <text>` in chunks, completed. */
const defaultScript = (text: string): Script => {
  const response = `Echo: ${text}`;
  return {
    turns: 1,
    thinking: ['Reading the message'],
    chunks: splitReply(response),
    reply: null,
    tools: 0,
    toolError: false,
    fail: null,
    input: null,
    reopen: false,
    delayMs: null,
    hold: false,
    burst: false,
    startChunks: 0,
    response,
  };
};

const num = (v: unknown, dflt: number): number =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : dflt;

const parseInput = (v: unknown): InputSpec | null => {
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  return {
    prompt: typeof o.prompt === 'string' ? o.prompt : 'Please answer',
    outcome: o.outcome === 'timeout' ? 'timeout' : 'answer',
    afterMs: num(o.afterMs, 0),
  };
};

/** Pick the script for a message text. A `#sim` whose JSON does not parse falls back to the echo. */
export const parseScript = (text: string): Script => {
  if (!text.startsWith(SIM_PREFIX)) return defaultScript(text);
  let spec: unknown;
  try {
    spec = JSON.parse(text.slice(SIM_PREFIX.length));
  } catch {
    return defaultScript(text);
  }
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) return defaultScript(text);
  const s = spec as Record<string, unknown>;
  const chunkCount = num(s.chunks, 0);
  const chunkBytes = num(s.chunkBytes, 0);
  // Extension: `chunkBytes` pads every chunk (reply and thinking) to that size, for backpressure tests.
  const pad = (base: string): string =>
    chunkBytes > base.length ? base + 'x'.repeat(chunkBytes - base.length) : base;
  const chunks = Array.from({ length: chunkCount }, (_, i) =>
    pad(`chunk ${i + 1}${i < chunkCount - 1 ? ' ' : ''}`),
  );
  const reply = typeof s.reply === 'string' ? s.reply : null;
  const tools = num(s.tools, 0);
  const input = parseInput(s.input);
  const needsSecondTurn = tools > 0 || input !== null;
  return {
    turns: Math.max(num(s.turns, 1), needsSecondTurn ? 2 : 1, 1),
    thinking: Array.from({ length: num(s.thinking, 0) }, (_, i) => pad(`thought ${i + 1}`)),
    chunks: reply === null ? chunks : [],
    reply,
    tools,
    toolError: s.toolError === true,
    fail: typeof s.fail === 'string' ? s.fail : null,
    input,
    reopen: s.reopen === true,
    delayMs: typeof s.delayMs === 'number' ? num(s.delayMs, 0) : null,
    hold: s.hold === true,
    burst: s.burst === true,
    startChunks: num(s.startChunks, 0),
    response: reply ?? chunks.join(''),
  };
};
