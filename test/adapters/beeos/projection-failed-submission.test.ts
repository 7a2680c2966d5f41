/**
 * The BeeOS channel projection of a caller message that became durable only after its caller was
 * told it failed (the store was down): the `submission-failed` fact that follows it says it failed,
 * in reply to it, and the next message's reply is paired with that next message, not with it.
 */
import { describe, expect, it } from 'vitest';
import type { LogEntry } from '../../../src/log/record.js';
import {
  AT,
  beeosMessage,
  expectFailedThenNextAnswered,
  projectConversation,
} from './support/conversation-log.js';

const CTX = 'ch-1';
const turn = (messageId: string, text: string): LogEntry => beeosMessage(CTX, messageId, text);
const failed = (messageId: string): LogEntry => ({
  kind: 'fact',
  fact: 'submission-failed',
  messageId,
  reason: 'store-unavailable',
  receivedAt: AT,
});

const project = (entries: LogEntry[]) => projectConversation(CTX, entries);

describe('BeeOS: a submission that failed before it was durable', () => {
  it('ends in agent_reply_error in reply to it, and the next reply answers the next message', () => {
    expectFailedThenNextAnswered(CTX, turn, {
      messageId: 'm-lost',
      text: 'lost',
      failure: failed('m-lost'),
      payload: { code: 'agent_service_unavailable' },
    });
  });

  it('a fact about a message of another channel projects nothing', () => {
    expect(project([turn('m1', 'x'), failed('m-other')]).map((e) => e.type)).toEqual(['chat_message']);
  });
});
