/**
 * The BeeOS channel projection of a context another surface writes to (an AI SDK chat read as a
 * conversation, a Flue conversation): their messages are caller messages; their bookkeeping (a
 * refusal, a settlement) is none. A refusal ends the message it names in agent_reply_error, and
 * the next reply answers the next message.
 */
import { describe, expect, it } from 'vitest';
import type { LogEntry } from '../../../src/log/record.js';
import { AT as at, expectFailedThenNextAnswered, projectConversation } from './support/conversation-log.js';

const CTX = 'o-0123456789ab-chat-1';
const chatMessage = (messageId: string, text: string): LogEntry => ({
  kind: 'submission',
  protocol: 'ai-sdk',
  owner: 'alice',
  contextId: CTX,
  messageId,
  text,
  meta: { aiSdk: { op: 'message', userMessageId: `u-${messageId}`, assistantMessageId: `a-${messageId}` } },
  queued: true,
  receivedAt: at,
});
const chatRefusal = (inReplyTo: string, error: string): LogEntry => ({
  kind: 'submission',
  protocol: 'ai-sdk',
  owner: 'alice',
  contextId: CTX,
  messageId: `refusal-${inReplyTo}`,
  text: '',
  meta: { aiSdk: { op: 'failed', inReplyTo, error } },
  receivedAt: at,
});
const flueMessage = (messageId: string, text: string): LogEntry => ({
  kind: 'submission',
  protocol: 'flue',
  owner: 'alice',
  contextId: CTX,
  messageId,
  text,
  meta: { flue: 'message', submissionId: `sub_${messageId}`, uid: 'u', kind: 'user', body: text },
  queued: true,
  receivedAt: at,
});
const flueSettlement = (messageId: string, message: string): LogEntry => ({
  kind: 'submission',
  protocol: 'flue',
  owner: null,
  contextId: CTX,
  messageId,
  text: '',
  meta: { flue: 'settlement', submissionId: `sub_${messageId}`, outcome: 'failed', error: { message } },
  receivedAt: at,
});

const project = (entries: LogEntry[]) => projectConversation(CTX, entries);

describe('BeeOS: a context other surfaces write to', () => {
  it('an AI SDK refusal ends its message in agent_reply_error; the next reply answers the next message', () => {
    const envelopes = expectFailedThenNextAnswered(CTX, chatMessage, {
      messageId: 'm-refused',
      text: 'refused one',
      failure: chatRefusal('m-refused', 'the capsule is busy and refused the message'),
      payload: { error: 'the capsule is busy and refused the message' },
    });
    expect(envelopes[0]).toMatchObject({ message_id: 'm-refused', payload: { text: 'refused one' } });
  });

  it('a Flue failed settlement ends its message the same way', () => {
    const envelopes = project([
      flueMessage('f-1', 'from Flue'),
      flueSettlement('f-1', 'capsule unreachable'),
    ]);
    expect(envelopes.map((e) => [e.type, e.in_reply_to ?? null])).toEqual([
      ['chat_message', null],
      ['agent_reply_error', 'f-1'],
    ]);
    expect(envelopes[1]!.payload).toMatchObject({ error: 'capsule unreachable' });
  });

  it('a refusal of a message the channel does not hold projects nothing', () => {
    expect(project([chatMessage('m1', 'x'), chatRefusal('m-other', 'no')]).map((e) => e.type)).toEqual([
      'chat_message',
    ]);
  });
});
