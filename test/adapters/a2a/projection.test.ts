/** The task fold: a loss in the log is a status update that says so, never a silent hole. */
import { describe, expect, it } from 'vitest';
import type { LogRecord } from '../../../src/log/record.js';
import { TaskProjector } from '../../../adapters/a2a/projection.js';

const at = 1_700_000_000_000;
const records: LogRecord[] = [
  {
    kind: 'submission',
    protocol: 'a2a',
    owner: 'o',
    contextId: 'ctx',
    messageId: 'sub-1',
    text: 'hi',
    meta: { a2a: { taskId: 't-1', contextId: 'ctx', messageId: 'm-1', text: 'hi' } },
    queued: true,
    receivedAt: at,
    offset: 10,
  },
  {
    kind: 'fact',
    fact: 'submission-started',
    messageId: 'sub-1',
    contextId: 'ctx',
    taskId: 'tsk_1',
    receivedAt: at,
    offset: 11,
  },
  {
    kind: 'frame',
    event: 'status',
    upstreamId: '0',
    data: '{"id":"tsk_1","context_id":"ctx","status":{"state":"working","message":"inference turn 1"},"final":false}',
    receivedAt: at,
    offset: 12,
  },
  {
    kind: 'frame',
    event: 'text',
    upstreamId: '1',
    data: '{"id":"tsk_other","text":"not ours","final":false}',
    receivedAt: at,
    offset: 13,
  },
  {
    kind: 'frame',
    event: 'text',
    upstreamId: '2',
    data: '{"id":"tsk_1","text":"Hel","final":false}',
    receivedAt: at,
    offset: 14,
  },
  { kind: 'fact', fact: 'frames-possibly-missing', reason: 'no-overlap', receivedAt: at, offset: 15 },
  {
    kind: 'frame',
    event: 'text',
    upstreamId: '3',
    data: '{"id":"tsk_1","text":"lo","final":false}',
    receivedAt: at,
    offset: 16,
  },
  {
    kind: 'frame',
    event: 'status',
    upstreamId: '4',
    data: '{"id":"tsk_1","context_id":"ctx","status":{"state":"completed","message":"session ended","response":"Hello"},"final":true}',
    receivedAt: at,
    offset: 17,
  },
];

describe('A2A task fold', () => {
  it('folds its own frames only, says where frames may be missing, and ends at the final status', () => {
    const t = new TaskProjector('t-1');
    const events = records.map((r) => [r.offset, t.apply(r)] as const).filter(([, e]) => e !== null);
    expect(events.map(([o, e]) => [o, e?.type])).toEqual([
      [10, 'task'],
      [12, 'status'],
      [14, 'artifact'],
      [15, 'status'],
      [16, 'artifact'],
      [17, 'status'],
    ]);
    const loss = events.find(([o]) => o === 15)?.[1];
    expect(loss).toMatchObject({
      type: 'status',
      status: { state: 'working', message: { text: 'frames may be missing here (no-overlap)' } },
    });
    expect(t.status.state).toBe('completed');
    expect(t.status.message?.text).toBe('Hello');
    expect(t.artifacts.get('response')?.text).toBe('Hello');
    expect(t.cursor).toBe(17);
  });
});
