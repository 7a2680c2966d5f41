// Pure pieces of the simulator: frame bytes, id parsing, the replay rule table, the params parser.
import { describe, expect, it } from 'vitest';
import { encodeFrame, errorFrame, gapFrame, statusFrame, artifactFrame } from '../../src/simulator/frames.js';
import { ReplayBuffer } from '../../src/simulator/replay-buffer.js';
import { parseLastEventId, mintTaskId, mintContextId } from '../../src/simulator/ids.js';
import { parseMessageParams } from '../../src/simulator/message.js';
import { parseScript } from '../../src/simulator/script.js';

const f = (id: number | bigint | null, data = 'x'): ReturnType<typeof encodeFrame> =>
  encodeFrame('text', data, id === null ? null : BigInt(id));
const ids = (frames: { id: bigint | null; event: string }[]): (string | null)[] =>
  frames.map((x) => (x.event === 'gap' ? 'gap' : (x.id?.toString() ?? null)));

describe('frame encoding', () => {
  it('writes id, event, data lines with \\n only, id line only when set', () => {
    expect(encodeFrame('status', '{}', 3n).bytes).toBe('id: 3\nevent: status\ndata: {}\n\n');
    expect(encodeFrame('gap', '{"first_available_id":1}').bytes).toBe(
      'event: gap\ndata: {"first_available_id":1}\n\n',
    );
    expect(encodeFrame('text', '{}', 18446744073709551615n).bytes).toContain('id: 18446744073709551615\n');
  });

  it('omits context_id where the spec says and puts response only on completed', () => {
    const base = { taskId: 'tsk_a', message: 'm' };
    expect(statusFrame({ ...base, contextId: null, state: 'input-required' }, 1n).data).toBe(
      '{"id":"tsk_a","status":{"state":"input-required","message":"m"},"final":false}',
    );
    expect(statusFrame({ ...base, contextId: 'ctx_b', state: 'completed', response: 'r' }, 1n).data).toBe(
      '{"id":"tsk_a","context_id":"ctx_b","status":{"state":"completed","message":"m","response":"r"},"final":true}',
    );
    expect(statusFrame({ ...base, contextId: 'ctx_b', state: 'failed', response: 'r' }, 1n).data).toBe(
      '{"id":"tsk_a","context_id":"ctx_b","status":{"state":"failed","message":"m"},"final":true}',
    );
  });

  it('writes every artifact key in the spec order', () => {
    const frame = artifactFrame(
      'tsk_a',
      {
        truncated: false,
        exit_code: null,
        duration_ms: null,
        is_error: false,
        tool_call_id: null,
        fence_source: null,
        content: 'c',
        tool_name: 'hook',
      },
      0n,
    );
    expect(frame.data).toBe(
      '{"id":"tsk_a","artifact":{"tool_name":"hook","content":"c","fence_source":null,"tool_call_id":null,"is_error":false,"duration_ms":null,"exit_code":null,"truncated":false}}',
    );
  });

  it('splices the error message without escaping', () => {
    expect(errorFrame('invalid type: string "x"').bytes).toBe(
      'event: error\ndata: {"error":"invalid type: string "x""}\n\n',
    );
  });

  it('mints tsk_/ctx_ ids with 32 hex digits, version 7', () => {
    expect(mintTaskId()).toMatch(/^tsk_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
    expect(mintContextId()).toMatch(/^ctx_[0-9a-f]{32}$/);
  });
});

describe('Last-Event-ID parsing', () => {
  it.each([
    ['0', 0n],
    ['42', 42n],
    ['+7', 7n],
    ['18446744073709551615', 18446744073709551615n],
  ])('%s is a number', (v, n) => expect(parseLastEventId(v)).toBe(n));
  it.each([undefined, '', 'abc', '-1', '1.5', '18446744073709551616', ' 1x'])('%s is not', (v) =>
    expect(parseLastEventId(v)).toBeNull(),
  );
});

describe('replay buffer (spec "Replay")', () => {
  const buffer = (list: (number | bigint)[], cap = 512): ReplayBuffer => {
    const b = new ReplayBuffer(cap);
    for (const id of list) b.push(f(id));
    return b;
  };

  it('empty buffer replays nothing', () => expect(buffer([]).replay(0n)).toEqual([]));
  it('replay from 0 skips every id-0 frame', () =>
    expect(ids(buffer([0, 1, 2, 0, 1, 2]).replay(0n))).toEqual(['1', '2', '1', '2']));
  it('writes frames with id > N in buffer order, including earlier tasks', () =>
    expect(ids(buffer([0, 1, 2, 3, 0, 1]).replay(1n))).toEqual(['2', '3']));
  it('oldest id > N+1 → gap naming it, then the whole buffer (id-0 frames included)', () => {
    const out = buffer([5, 6, 0, 1]).replay(3n);
    expect(ids(out)).toEqual(['gap', '5', '6', '0', '1']);
    expect(out[0]?.bytes).toBe('event: gap\ndata: {"first_available_id":5}\n\n');
  });
  it('oldest id == N+1 → no gap', () => expect(ids(buffer([4, 5]).replay(3n))).toEqual(['4', '5']));
  it('a high first id (queued cancel) fires gap from 0 without any eviction', () =>
    expect(ids(buffer([2305843009213693951n, 0, 1]).replay(0n))).toEqual([
      'gap',
      '2305843009213693951',
      '0',
      '1',
    ]));
  it('evicts the oldest past capacity; no gap when the oldest left has a low id', () => {
    const b = buffer([0, 1, 2, 0, 1, 2], 5);
    expect(b.size).toBe(5);
    expect(ids(b.replay(0n))).toEqual(['1', '2', '1', '2']);
  });
  it('never enters a frame without id', () => {
    const b = new ReplayBuffer(4);
    b.push(gapFrame(1n));
    expect(b.size).toBe(0);
  });
});

describe('message params parsing (serde wording)', () => {
  const ok = { messageId: 'm', role: 'user', parts: [{ text: 'hi' }] };
  it('accepts params.message or params itself', () => {
    expect(parseMessageParams({ message: ok })).toEqual({ ok: true, message: ok });
    expect(parseMessageParams({ ...ok, contextId: 'ctx_1' })).toEqual({
      ok: true,
      message: { ...ok, contextId: 'ctx_1' },
    });
  });
  it.each([
    [{ role: 'user', parts: [] }, 'missing field `messageId`'],
    [{ messageId: 'm', parts: [] }, 'missing field `role`'],
    [{ messageId: 'm', role: 'user' }, 'missing field `parts`'],
    [{ ...ok, parts: 'x' }, 'invalid type: string "x", expected a sequence'],
    [{ ...ok, messageId: 5 }, 'invalid type: integer `5`, expected a string'],
    [{ ...ok, parts: [{}] }, 'missing field `text`'],
    [{ ...ok, parts: [3] }, 'invalid type: integer `3`, expected struct Part'],
    ['x', 'invalid type: string "x", expected struct Message'],
    [null, 'invalid type: null, expected struct Message'],
  ])('%j → %s', (params, error) => expect(parseMessageParams(params)).toEqual({ ok: false, error }));
});

describe('scripts', () => {
  it('plain text → echo in chunks', () => {
    const s = parseScript('hello big world');
    expect(s.chunks).toEqual(['Echo:', ' hello', ' big', ' world']);
    expect(s.response).toBe('Echo: hello big world');
  });
  it('#sim picks an explicit script; bad JSON falls back to echo', () => {
    expect(parseScript('#sim {"chunks":2,"tools":1}')).toMatchObject({
      chunks: ['chunk 1 ', 'chunk 2'],
      tools: 1,
      turns: 2,
    });
    expect(parseScript('#sim {nope').response).toBe('Echo: #sim {nope');
  });
});
