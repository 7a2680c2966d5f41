/**
 * Log entries of one BeeOS conversation, and the envelopes a conversation projector makes of them:
 * the record builders the projection tests share (a caller's message, a task's status frame, any
 * frame), so each test states only the entries its case is about.
 */
import { expect } from 'vitest';
import { ChannelProjector, type Envelope } from '../../../../adapters/beeos/projection.js';
import type { LogEntry, LogRecord } from '../../../../src/log/record.js';

/** Every entry's receivedAt: the projection ignores time, so one instant serves. */
export const AT = 1_700_000_000_000;

/** A caller's message posted to conversation `conv_1` of context `contextId`, as alice. */
export const beeosMessage = (contextId: string, messageId: string, text: string): LogEntry => ({
  kind: 'submission',
  protocol: 'beeos',
  owner: 'alice',
  contextId,
  messageId,
  text,
  meta: { beeos: { op: 'message', channelId: 'conv_1' } },
  receivedAt: AT,
});

/** A capsule frame of `event` with upstream id `id`. */
export const frameEntry = (event: string, data: Record<string, unknown>, id: string): LogEntry => ({
  kind: 'frame',
  event,
  upstreamId: id,
  data: JSON.stringify(data),
  receivedAt: AT,
});

/** Task `task`'s status frame (id 0), naming its context only when `ctx` is given; final when completed. */
export const taskStatus = (task: string, ctx: string | null, state: string, response?: string): LogEntry =>
  frameEntry(
    'status',
    {
      id: task,
      ...(ctx ? { context_id: ctx } : {}),
      status: { state, message: state, ...(response ? { response } : {}) },
      final: state === 'completed',
    },
    '0',
  );

/** The envelopes alice's conversation on capsule `cap` over `contextId` shows for `entries`, offsets from 1. */
export const projectConversation = (contextId: string, entries: LogEntry[]): Envelope[] => {
  const p = new ChannelProjector({ kind: 'conversation', agentId: 'cap', contextId, owner: 'alice' });
  const records: LogRecord[] = entries.map((e, i) => ({ ...e, offset: i + 1 }));
  return records.flatMap((r) => p.project(r).envelopes.map((x) => x.envelope));
};

/**
 * The case every way a message can fail must pass: message `lostId`, the record that fails it
 * (`failure`), message `m-next`, then a task that works and completes. The lost message ends in one
 * agent_reply_error carrying `payload`; both replies after it answer `m-next`. Returns the envelopes.
 */
export const expectFailedThenNextAnswered = (
  contextId: string,
  message: (messageId: string, text: string) => LogEntry,
  lost: { messageId: string; text: string; failure: LogEntry; payload: Record<string, unknown> },
): Envelope[] => {
  const envelopes = projectConversation(contextId, [
    message(lost.messageId, lost.text),
    lost.failure,
    message('m-next', 'next'),
    taskStatus('t1', contextId, 'working'),
    taskStatus('t1', null, 'completed', 'hello'),
  ]);
  expect(envelopes.map((e) => e.type)).toEqual([
    'chat_message',
    'agent_reply_error',
    'chat_message',
    'agent_reply',
    'agent_reply',
  ]);
  expect(envelopes[1]).toMatchObject({
    in_reply_to: lost.messageId,
    offset: 8,
    state: 'failed',
    stop_reason: 'agent_lost',
    payload: lost.payload,
  });
  for (const reply of envelopes.slice(3)) expect(reply.in_reply_to).toBe('m-next');
  return envelopes;
};
