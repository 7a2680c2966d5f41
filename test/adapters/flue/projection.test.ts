/**
 * The Flue projection as a pure function: the mapping table of docs/surfaces/flue.md on hand-made records, and
 * the property that a snapshot at X plus the updates after X equals a fresh snapshot, over many
 * random workloads read in random pages by freshly rebuilt projectors (as the routes do).
 */
import { describe, expect, it } from 'vitest';
import type { FlueChunk } from '../../../adapters/flue/chunks.js';
import { ConversationProjector } from '../../../adapters/flue/projection.js';
import { applyChunk, type ConversationState } from '../../../adapters/flue/snapshot.js';
import type { LogEntry, LogRecord } from '../../../src/log/record.js';
import {
  artifact,
  frame,
  numbered,
  prng,
  randomWorkload,
  sessionStarted,
  settlement,
  status,
  submission,
  text,
  thinking,
} from './records.js';

const CONV = 'conv-1';
const EPOCH = 7;

const projectAll = (
  records: LogRecord[],
  through = Infinity,
): { p: ConversationProjector; chunks: FlueChunk[] } => {
  const p = new ConversationProjector(CONV, EPOCH);
  const chunks: FlueChunk[] = [];
  for (const r of records) if (r.offset <= through) chunks.push(...p.project(r));
  return { p, chunks };
};

/** Chunks after `after` as a route computes them: a fresh projector rebuilt through `after`. */
const updatesAfter = (records: LogRecord[], after: number, until: number): FlueChunk[] => {
  const { p } = projectAll(records, after);
  const out: FlueChunk[] = [];
  for (const r of records) if (r.offset > after && r.offset <= until) out.push(...p.project(r));
  return JSON.parse(JSON.stringify(out)) as FlueChunk[];
};

const strip = (chunks: FlueChunk[]) => chunks.map(({ conversationId: _c, position: _p, ...rest }) => rest);

describe('flue projection table', () => {
  it('projects a streamed reply: reset at creation, started, deltas, completed, settled', () => {
    const records = numbered([
      submission(CONV, 's1', 'hello'),
      status('t1', CONV, 'working', 'inference turn 1'),
      thinking('t1', 'hmm'),
      text('t1', 'Echo:'),
      text('t1', ' hello'),
      text('t1', '', true),
      status('t1', CONV, 'completed', 'session ended', 'Echo: hello'),
    ]);
    const { p, chunks } = projectAll(records);
    expect(chunks.map((c) => c.type)).toEqual([
      'conversation-reset',
      'message-started',
      'message-delta',
      'message-delta',
      'message-delta',
      'message-completed',
      'submission-settled',
    ]);
    expect(chunks[0]).toMatchObject({
      position: { batch: 1, index: 0 },
      snapshot: { v: 1, conversationId: CONV, offset: '0000000000000007_0000000000000001', settlements: [] },
    });
    expect(chunks[1]).toMatchObject({
      messageId: 'asst_s1',
      submissionId: 's1',
      position: { batch: 2, index: 0 },
    });
    expect(strip(chunks.slice(2, 5))).toEqual([
      { type: 'message-delta', messageId: 'asst_s1', kind: 'reasoning', delta: 'hmm' },
      { type: 'message-delta', messageId: 'asst_s1', kind: 'text', delta: 'Echo:' },
      { type: 'message-delta', messageId: 'asst_s1', kind: 'text', delta: ' hello' },
    ]);
    expect(chunks[6]).toMatchObject({
      submissionId: 's1',
      outcome: 'completed',
      position: { batch: 7, index: 1 },
    });
    expect(p.snapshot(7)).toEqual({
      v: 1,
      conversationId: CONV,
      offset: '0000000000000007_0000000000000007',
      messages: [
        {
          id: 'msg_s1',
          role: 'user',
          purpose: 'user',
          display: 'visible',
          submissionId: 's1',
          parts: [{ type: 'text', text: 'hello', state: 'done' }],
        },
        {
          id: 'asst_s1',
          role: 'assistant',
          purpose: 'assistant',
          display: 'visible',
          submissionId: 's1',
          parts: [
            { type: 'reasoning', text: 'hmm', state: 'done' },
            { type: 'text', text: 'Echo: hello', state: 'done' },
          ],
        },
      ],
      settlements: [{ submissionId: 's1', outcome: 'completed' }],
    });
  });

  it('a whole-reply text frame becomes one delta; tools become tool-input + output / output-error', () => {
    const records = numbered([
      submission(CONV, 's1', 'x'),
      status('t1', CONV, 'working', 'inference turn 1'),
      artifact('t1', 'call_1', false),
      artifact('t1', 'call_1', true),
      artifact('t1', null, false),
      text('t1', 'whole', true),
      status('t1', CONV, 'completed', 'session ended', 'whole'),
    ]);
    const { chunks, p } = projectAll(records);
    expect(strip(chunks.slice(2, 8))).toEqual([
      {
        type: 'tool-input',
        messageId: 'asst_s1',
        toolCallId: 'call_1',
        toolName: 'bash',
        input: null,
        timestamp: expect.any(String),
      },
      {
        type: 'tool-output',
        toolCallId: 'call_1',
        output: 'ok',
        durationMs: 7,
        timestamp: expect.any(String),
      },
      // A repeated provider id (a reopened attempt) gets a distinct id so both calls show.
      {
        type: 'tool-input',
        messageId: 'asst_s1',
        toolCallId: 't1:4',
        toolName: 'bash',
        input: null,
        timestamp: expect.any(String),
      },
      {
        type: 'tool-output-error',
        toolCallId: 't1:4',
        errorText: 'boom',
        durationMs: 7,
        timestamp: expect.any(String),
      },
      {
        type: 'tool-input',
        messageId: 'asst_s1',
        toolCallId: 't1:5',
        toolName: 'bash',
        input: null,
        timestamp: expect.any(String),
      },
      { type: 'tool-output', toolCallId: 't1:5', output: 'ok', durationMs: 7, timestamp: expect.any(String) },
    ]);
    expect(strip(chunks.slice(8, 9))).toEqual([
      { type: 'message-delta', messageId: 'asst_s1', kind: 'text', delta: 'whole' },
    ]);
    expect(p.snapshot(7).messages[1]?.parts.map((x) => x.type)).toEqual([
      'dynamic-tool',
      'dynamic-tool',
      'dynamic-tool',
      'text',
    ]);
  });

  it('0.6 tool-call frames: the call is input-available while it runs, its artifact brings the output', () => {
    const records = numbered([
      submission(CONV, 's1', 'x'),
      status('t1', CONV, 'working', 'inference turn 1'),
      frame('tool-call-started', { id: 't1', tool_call_id: 'call_9', tool_name: 'bash' }),
      frame('tool-call-progress', { id: 't1', tool_call_id: 'call_9', input_bytes: 120 }),
      artifact('t1', 'call_9', false),
      status('t1', CONV, 'completed', 'session ended', ''),
    ]);
    const { chunks, p } = projectAll(records, 3);
    expect(strip(chunks.slice(2))).toEqual([
      {
        type: 'tool-input',
        messageId: 'asst_s1',
        toolCallId: 'call_9',
        toolName: 'bash',
        input: null,
        timestamp: expect.any(String),
      },
    ]);
    expect(p.snapshot(3).messages[1]?.parts).toMatchObject([
      { type: 'dynamic-tool', toolCallId: 'call_9', state: 'input-available' },
    ]);
    const all = projectAll(records);
    // Progress says nothing Flue can show; the artifact completes the same call, not a second one.
    expect(strip(all.chunks.slice(3, 4))).toEqual([
      {
        type: 'tool-output',
        toolCallId: 'call_9',
        output: 'ok',
        durationMs: 7,
        timestamp: expect.any(String),
      },
    ]);
    expect(all.p.snapshot(6).messages[1]?.parts).toMatchObject([
      { type: 'dynamic-tool', toolCallId: 'call_9', state: 'output-available', output: 'ok' },
    ]);
  });

  it('input waits become a data part; input-timeout is not an end; failed and canceled settle', () => {
    const records = numbered([
      submission(CONV, 's1', 'x'),
      status('t1', CONV, 'working', 'inference turn 1'),
      status('t1', null, 'input-required', 'Which file?'),
      status('t1', null, 'failed', 'input-timeout'),
      status('t1', CONV, 'failed', 'max_turns exceeded'),
      submission(CONV, 's2', 'y'),
      status('t2', CONV, 'working', 'inference turn 1'),
      status('t2', CONV, 'canceled', 'task canceled'),
    ]);
    const { chunks } = projectAll(records);
    const types = chunks.map((c) => c.type);
    expect(types).toEqual([
      'conversation-reset',
      'message-started',
      'data-part',
      'data-part',
      'message-completed',
      'submission-settled',
      'message-appended',
      'message-started',
      'message-completed',
      'submission-settled',
    ]);
    expect(chunks[2]).toMatchObject({
      name: 'input-required',
      data: { prompt: 'Which file?', state: 'waiting' },
    });
    expect(chunks[3]).toMatchObject({ data: { prompt: 'Which file?', state: 'timeout' } });
    expect(chunks[5]).toMatchObject({ outcome: 'failed', error: { message: 'max_turns exceeded' } });
    expect(chunks[9]).toMatchObject({
      submissionId: 's2',
      outcome: 'aborted',
      error: { message: 'task canceled' },
    });
  });

  it('signals are system messages; other contexts, foreign protocols and earlier tasks project nothing', () => {
    const records = numbered([
      status('t0', CONV, 'working', 'inference turn 1'), // before the conversation existed
      submission('other', 'o1', 'not ours'),
      submission(CONV, 's1', 'sig', { kind: 'signal' }),
      text('t0', 'late'),
      submission(CONV, 'b1', 'beeos', { protocol: 'beeos' }),
      status('t9', 'other', 'working', 'inference turn 1'),
    ]);
    const { chunks, p } = projectAll(records);
    expect(chunks.map((c) => c.type)).toEqual(['conversation-reset']);
    expect(p.snapshot(6).messages).toEqual([
      {
        id: 'msg_s1',
        role: 'system',
        purpose: 'dispatch',
        display: 'diagnostic',
        submissionId: 's1',
        signal: { tagName: 'ping', attributes: { a: '1' } },
        parts: [{ type: 'text', text: 'sig', state: 'done' }],
      },
    ]);
  });

  it('a surface settlement settles a submission that never ran; a restart fails open tasks', () => {
    const records = numbered([
      submission(CONV, 's1', 'x'),
      settlement(CONV, 's1'),
      submission(CONV, 's2', 'y'),
      status('t2', CONV, 'working', 'inference turn 1'),
      sessionStarted(),
    ]);
    const { chunks, p } = projectAll(records);
    // s1 never got a task: t2 belongs to s2.
    expect(chunks.find((c) => c.type === 'message-started')).toMatchObject({ submissionId: 's2' });
    expect(p.snapshot(5).settlements).toEqual([
      { submissionId: 's1', outcome: 'failed', error: { message: 'capsule is busy' } },
      { submissionId: 's2', outcome: 'failed', error: { message: 'capsule restarted: task lost' } },
    ]);
    expect(p.openTasks()).toEqual([]);
  });
});

describe('a submission its client was told failed (store down), durable only later', () => {
  const failed = (messageId: string): LogEntry => ({
    kind: 'fact',
    fact: 'submission-failed',
    messageId,
    reason: 'store-unavailable',
    receivedAt: 1_700_000_000_000,
  });

  it('never takes a task, leaves the transcript by a reset, and snapshot + updates still agree', () => {
    const records = numbered([
      submission(CONV, 's1', 'first'),
      status('t1', CONV, 'working', 'inference turn 1'),
      status('t1', null, 'completed', 'done', 'r1'),
      submission(CONV, 'orphan', 'never sent'),
      failed('msg_orphan'),
      submission(CONV, 's3', 'third'),
      status('t3', CONV, 'working', 'inference turn 1'),
      status('t3', null, 'completed', 'done', 'r3'),
    ]);
    const { chunks, p } = projectAll(records);
    // The fact's batch is one conversation-reset whose snapshot no longer holds the orphan.
    const reset = chunks.filter((c) => c.type === 'conversation-reset' && c.position.batch === 5);
    expect(reset).toHaveLength(1);
    const ids = (m: { id: string }[]) => m.map((x) => x.id);
    expect(ids((reset[0] as Extract<FlueChunk, { type: 'conversation-reset' }>).snapshot.messages)).toEqual([
      'msg_s1',
      'asst_s1',
    ]);
    // t3 is s3's task, not the orphan's.
    const started = chunks.filter((c) => c.type === 'message-started');
    expect(started.map((c) => (c as { submissionId?: string }).submissionId)).toEqual(['s1', 's3']);
    const snapshot = p.snapshot(records.length);
    expect(ids(snapshot.messages)).toEqual(['msg_s1', 'asst_s1', 'msg_s3', 'asst_s3']);
    expect(snapshot.settlements.map((s) => s.submissionId)).toEqual(['s1', 's3']);
    // A reader holding the state at every offset converges on the fresh snapshot.
    for (let x = 0; x <= records.length; x++) {
      const { p: at } = projectAll(records, x);
      const state: ConversationState = structuredClone(at.state);
      for (const chunk of updatesAfter(records, x, records.length)) applyChunk(state, chunk);
      expect(state.messages).toEqual(snapshot.messages);
    }
  });

  it('a fact naming another conversation’s or an unknown message projects nothing', () => {
    const records = numbered([submission(CONV, 's1', 'first'), failed('msg_elsewhere')]);
    const { chunks } = projectAll(records);
    expect(chunks.filter((c) => c.position.batch === 2)).toEqual([]);
  });
});

describe('flue projection property: snapshot at X + updates after X = fresh snapshot', () => {
  it('holds over many random workloads read in random pages', () => {
    let checked = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const records = randomWorkload(seed, CONV);
      const head = records.length;
      const fresh = projectAll(records).p.snapshot(head);
      const rand = prng(seed * 7919);
      // Start from a snapshot at X (or from -1 = empty state), then read pages like a client.
      const start = Math.floor(rand() * (head + 1));
      const fromOrigin = rand() < 0.3;
      let after = fromOrigin ? 0 : start;
      const base = projectAll(records, after).p;
      const state: ConversationState = fromOrigin
        ? { conversationId: CONV, messages: [], settlements: [] }
        : (JSON.parse(JSON.stringify(base.snapshot(after))) as ConversationState);
      let last: { batch: number; index: number } | undefined;
      // Bounded: each page advances `after` by at least one record.
      while (after < head) {
        const until = Math.min(head, after + 1 + Math.floor(rand() * 10));
        for (const chunk of updatesAfter(records, after, until)) {
          expect(chunk.conversationId).toBe(CONV);
          if (last)
            expect(chunk.position.batch * 1000 + chunk.position.index).toBeGreaterThan(
              last.batch * 1000 + last.index,
            );
          last = chunk.position;
          applyChunk(state, chunk);
        }
        after = until;
      }
      expect({ messages: state.messages, settlements: state.settlements }, `seed ${seed}`).toEqual({
        messages: fresh.messages,
        settlements: fresh.settlements,
      });
      checked++;
    }
    expect(checked).toBe(300);
  });
});
