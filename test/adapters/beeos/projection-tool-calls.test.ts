/**
 * The BeeOS channel projection of a 0.6 capsule's tool-call frames: the call shows as a `tool_use`
 * part while it streams, and its artifact adds the `tool_result` to that same call, not a second one.
 */
import { describe, expect, it } from 'vitest';
import { beeosMessage, frameEntry as frame, projectConversation } from './support/conversation-log.js';

const CTX = 'ch-1';
const turn = beeosMessage(CTX, 'm-1', 'run it');
const artifact = {
  tool_name: 'bash',
  content: 'ok',
  fence_source: 'tool:bash',
  tool_call_id: 'call_9',
  is_error: false,
  duration_ms: 7,
  exit_code: 0,
  truncated: false,
};

describe('BeeOS: 0.6 tool-call frames', () => {
  it('tool_use while the call runs, then its tool_result; progress shows nothing new', () => {
    const envelopes = projectConversation(CTX, [
      turn,
      frame(
        'status',
        {
          id: 't1',
          context_id: CTX,
          status: { state: 'working', message: 'inference turn 1' },
          final: false,
        },
        '1',
      ),
      frame('tool-call-started', { id: 't1', tool_call_id: 'call_9', tool_name: 'bash' }, '2'),
      frame('tool-call-progress', { id: 't1', tool_call_id: 'call_9', input_bytes: 64 }, '3'),
      frame('artifact', { id: 't1', artifact }, '4'),
    ]);
    const replies = envelopes.filter((e) => e.type === 'agent_reply');
    const started = replies.find((e) => (e.parts ?? []).some((p) => p.type === 'tool_use'));
    expect(started?.state).toBe('streaming');
    expect(started?.parts).toEqual([{ type: 'tool_use', id: 'call_9', name: 'bash' }]);
    expect(replies.at(-1)?.parts).toEqual([
      { type: 'tool_use', id: 'call_9', name: 'bash' },
      {
        type: 'tool_result',
        tool_use_id: 'call_9',
        name: 'bash',
        content: 'ok',
        is_error: false,
        exit_code: 0,
        duration_ms: 7,
        truncated: false,
      },
    ]);
    expect(replies.length).toBe(3); // the status, the started call, the artifact: progress added none
  });
});
