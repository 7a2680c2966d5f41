/**
 * The chat projection on its own (records in, chunks out): loss facts become a data part of the
 * turns they may concern, a capsule restart fails the running turn, a withdrawn queued message ends
 * its turn stopped, and projecting the same records twice gives the same chunks (what a replay
 * after a cut or a reload relies on).
 */
import { describe, expect, it } from 'vitest';
import type { LogRecord } from '../../../src/log/record.js';
import { ChatProjector } from '../../../adapters/ai-sdk/projection.js';

const CTX = 'chat-ctx';
let offset = 0;
const at = 1_700_000_000_000;

const message = (messageId: string, user: string, assistant: string): LogRecord => ({
  kind: 'submission',
  protocol: 'ai-sdk',
  owner: 'o',
  contextId: CTX,
  messageId,
  text: `text of ${user}`,
  meta: { aiSdk: { op: 'message', userMessageId: user, assistantMessageId: assistant } },
  queued: true,
  receivedAt: at,
  offset: ++offset,
});
const frame = (event: string, data: Record<string, unknown>): LogRecord => ({
  kind: 'frame',
  event,
  upstreamId: null,
  data: JSON.stringify(data),
  receivedAt: at,
  offset: ++offset,
});
const status = (task: string, state: string, message = '') =>
  frame('status', { id: task, context_id: CTX, status: { state, message }, final: state !== 'working' });
const text = (task: string, t: string) => frame('text', { id: task, text: t, final: false });
const fact = (f: Record<string, unknown>): LogRecord =>
  ({ kind: 'fact', receivedAt: at, offset: ++offset, ...f }) as LogRecord;
/** Message `messageId` withdrawn from the queue: stopped by its caller (aborted) or refused (failed). */
const withdrawn = (messageId: string, outcome: 'aborted' | 'failed', reason: string): LogRecord =>
  fact({ fact: 'submission-withdrawn', messageId, contextId: CTX, outcome, reason });

const project = (records: LogRecord[]): ChatProjector => {
  const p = new ChatProjector(CTX);
  for (const r of records) p.project(r);
  return p;
};

describe('chat projection', () => {
  it('a loss fact is a data-murmur-loss part of the running turn, not of a queued one', () => {
    const records = [
      message('m1', 'u1', 'a1'),
      message('m2', 'u2', 'a2'),
      status('t1', 'working', 'inference turn 1'),
      text('t1', 'Hel'),
      fact({ fact: 'frames-possibly-missing', reason: 'lagged', count: 3 }),
      text('t1', 'lo'),
      status('t1', 'completed'),
    ];
    const loss = records[4]!.offset;
    const p = project(records);
    const [first, second] = p.turns;
    expect(first!.chunks.map((c) => c.type)).toEqual([
      'start',
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
      'data-murmur-loss',
      'text-start',
      'text-delta',
      'text-end',
      'finish-step',
      'finish',
    ]);
    expect(first!.chunks[5]).toEqual({
      type: 'data-murmur-loss',
      id: `loss-${loss}`,
      data: { reason: 'lagged', offset: loss, count: 3 },
    });
    expect(p.messages()[1]!.parts).toContainEqual({
      type: 'data-murmur-loss',
      id: `loss-${loss}`,
      data: { reason: 'lagged', offset: loss, count: 3 },
    });
    // The second message still waits in the queue: none of its frames can be missing.
    expect(second!.chunks).toEqual([{ type: 'start', messageId: 'a2' }]);
    expect(p.activeTurn()).toBe(second);
  });

  it('a capsule restart fails the running turn with an error chunk', () => {
    const p = project([
      message('m1', 'u1', 'a1'),
      status('t1', 'working', 'inference turn 1'),
      fact({ fact: 'capsule-session-started', reason: 'restart' }),
    ]);
    expect(p.turns[0]!.chunks.slice(-3)).toEqual([
      { type: 'error', errorText: 'capsule restarted: task lost' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'error' },
    ]);
    expect(p.activeTurn()).toBeUndefined();
  });

  it('a queued message withdrawn (stop) ends its turn stopped; a failed one with its reason', () => {
    const p = project([
      message('m1', 'u1', 'a1'),
      message('m2', 'u2', 'a2'),
      withdrawn('m1', 'aborted', 'stopped'),
      withdrawn('m2', 'failed', 'no way'),
    ]);
    expect(p.turns[0]!.chunks).toEqual([
      { type: 'start', messageId: 'a1' },
      { type: 'abort', reason: 'stopped' },
      { type: 'finish', finishReason: 'other' },
    ]);
    expect(p.turns[1]!.chunks).toEqual([
      { type: 'start', messageId: 'a2' },
      { type: 'error', errorText: 'no way' },
      { type: 'finish', finishReason: 'error' },
    ]);
  });

  it('records of other contexts project to nothing; the same records give the same chunks', () => {
    const records = [
      message('m1', 'u1', 'a1'),
      frame('status', { id: 'other', context_id: 'elsewhere', status: { state: 'working', message: '' } }),
      frame('text', { id: 'other', text: 'not ours', final: false }),
      status('t1', 'working', 'inference turn 1'),
      frame('thinking', { id: 't1', text: 'hmm', final: false }),
      frame('artifact', {
        id: 't1',
        artifact: {
          tool_name: 'bash',
          content: 'out',
          fence_source: null,
          tool_call_id: 'c1',
          is_error: false,
          duration_ms: 3,
        },
      }),
      text('t1', 'done'),
      status('t1', 'completed'),
    ];
    const a = project(records);
    const b = project(records);
    expect(a.turns[0]!.chunks).toEqual(b.turns[0]!.chunks);
    expect(a.messages()).toEqual(b.messages());
    expect(JSON.stringify(a.turns[0]!.chunks)).not.toContain('not ours');
    expect(a.messages()[1]!.parts.map((p) => p.type)).toEqual([
      'step-start',
      'reasoning',
      'dynamic-tool',
      'text',
    ]);
  });

  it('withdrawn while handed over: its task still answers it (canceled), the next message keeps its own', () => {
    const p = project([
      message('m1', 'u1', 'a1'),
      message('m2', 'u2', 'a2'),
      fact({ fact: 'submission-handed', messageId: 'm1', contextId: CTX }),
      withdrawn('m1', 'aborted', 'stopped'),
      status('t1', 'working', 'inference turn 1'),
      status('t1', 'canceled', 'canceled'),
      status('t2', 'working', 'inference turn 1'),
      text('t2', 'second'),
      status('t2', 'completed'),
    ]);
    expect(p.turns[0]!.chunks.map((c) => c.type)).toEqual([
      'start',
      'start-step',
      'abort',
      'finish-step',
      'finish',
    ]);
    expect(p.turns[1]!.taskId).toBe('t2');
    expect(p.turns[1]!.parts.find((x) => x.type === 'text')).toMatchObject({ text: 'second' });
  });

  it('withdrawn while handed, then returned by the capsule: it never runs', () => {
    const p = project([
      message('m1', 'u1', 'a1'),
      fact({ fact: 'submission-handed', messageId: 'm1', contextId: CTX }),
      withdrawn('m1', 'aborted', 'stopped'),
      fact({ fact: 'submission-returned', messageId: 'm1', reason: 'busy' }),
    ]);
    expect(p.turns[0]!.chunks).toEqual([
      { type: 'start', messageId: 'a1' },
      { type: 'abort', reason: 'stopped' },
      { type: 'finish', finishReason: 'other' },
    ]);
  });
});
