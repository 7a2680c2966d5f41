/**
 * The BeeOS channel projection of a caller message that became durable only after its caller was
 * told it failed (the store was down): the `submission-failed` fact that follows it says it failed,
 * in reply to it, and the next message's reply is paired with that next message, not with it.
 */
import { describe, expect, it } from 'vitest';
import { ChannelProjector, type Envelope } from '../../../adapters/beeos/projection.js';
import type { LogEntry, LogRecord } from '../../../src/log/record.js';

const CTX = 'ch-1';
const at = 1_700_000_000_000;
const turn = (messageId: string, text: string): LogEntry => ({
  kind: 'submission',
  protocol: 'beeos',
  owner: 'alice',
  contextId: CTX,
  messageId,
  text,
  meta: { beeos: { op: 'message', channelId: 'conv_1' } },
  receivedAt: at,
});
const status = (task: string, ctx: string | null, state: string, response?: string): LogEntry => ({
  kind: 'frame',
  event: 'status',
  upstreamId: '0',
  data: JSON.stringify({
    id: task,
    ...(ctx ? { context_id: ctx } : {}),
    status: { state, message: state, ...(response ? { response } : {}) },
    final: state === 'completed',
  }),
  receivedAt: at,
});
const failed = (messageId: string): LogEntry => ({
  kind: 'fact',
  fact: 'submission-failed',
  messageId,
  reason: 'store-unavailable',
  receivedAt: at,
});

const project = (entries: LogEntry[]): Envelope[] => {
  const p = new ChannelProjector({ kind: 'conversation', agentId: 'cap', contextId: CTX, owner: 'alice' });
  const records: LogRecord[] = entries.map((e, i) => ({ ...e, offset: i + 1 }));
  return records.flatMap((r) => p.project(r).envelopes.map((x) => x.envelope));
};

describe('BeeOS: a submission that failed before it was durable', () => {
  it('ends in agent_reply_error in reply to it, and the next reply answers the next message', () => {
    const envelopes = project([
      turn('m-lost', 'lost'),
      failed('m-lost'),
      turn('m-next', 'next'),
      status('t1', CTX, 'working'),
      status('t1', null, 'completed', 'hello'),
    ]);
    expect(envelopes.map((e) => e.type)).toEqual([
      'chat_message',
      'agent_reply_error',
      'chat_message',
      'agent_reply',
      'agent_reply',
    ]);
    expect(envelopes[1]).toMatchObject({
      in_reply_to: 'm-lost',
      offset: 8,
      state: 'failed',
      stop_reason: 'agent_lost',
      payload: { code: 'agent_service_unavailable' },
    });
    for (const reply of envelopes.slice(3)) expect(reply.in_reply_to).toBe('m-next');
  });

  it('a fact about a message of another channel projects nothing', () => {
    expect(project([turn('m1', 'x'), failed('m-other')]).map((e) => e.type)).toEqual(['chat_message']);
  });
});
