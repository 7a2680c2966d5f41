/**
 * The BeeOS live path builds a chunk envelope (`include_deltas`) only when some reader shows it, and
 * encodes each envelope straight into bytes. Neither may change what a reader gets: a chunk built
 * after the rest of its task was projected is the chunk built at once, and the bytes are the SSE
 * frame of the envelope's JSON, byte for byte, whatever the text holds.
 */
import { describe, expect, it } from 'vitest';
import { encodeEnvelopeBytes } from '../../../adapters/beeos/codec.js';
import { ChannelProjector, type Envelope } from '../../../adapters/beeos/projection.js';
import { encodeSse } from '../../../src/http/sse.js';
import type { LogEntry, LogRecord } from '../../../src/log/record.js';

const CTX = 'ctx-1';
const at = 1_700_000_000_000;
const turn = (messageId: string): LogEntry => ({
  kind: 'submission',
  protocol: 'beeos',
  owner: 'alice',
  contextId: CTX,
  messageId,
  text: 'hi',
  meta: { beeos: { op: 'message', channelId: 'conv_1' } },
  receivedAt: at,
});
const frame = (event: string, data: Record<string, unknown>, i: number): LogEntry => ({
  kind: 'frame',
  event,
  upstreamId: String(i),
  data: JSON.stringify(data),
  receivedAt: at + i * 1000,
});

/** Two turns of one conversation: text and thinking chunks, then each task's completion. */
const log: LogRecord[] = [
  turn('m-1'),
  frame('status', { id: 't1', context_id: CTX, status: { state: 'working', message: '' } }, 1),
  frame('text', { id: 't1', text: 'Hello, ' }, 2),
  frame('thinking', { id: 't1', text: 'hmm' }, 3),
  frame('text', { id: 't1', text: 'wörld 🌍 "quoted" \\ \u2028' }, 4),
  frame(
    'status',
    { id: 't1', context_id: CTX, status: { state: 'completed', message: '', response: 'done' }, final: true },
    5,
  ),
  turn('m-2'),
  frame('status', { id: 't2', context_id: CTX, status: { state: 'working', message: '' } }, 7),
  frame('text', { id: 't2', text: 'again\t\u0001 ' }, 8),
  // A surrogate pair split across two chunks: escaping each alone differs from escaping the pair.
  frame('text', { id: 't2', text: 'split \ud83c' }, 9),
  frame('text', { id: 't2', text: '\udf0d after' }, 10),
  frame('text', { id: 't2', text: ' and on' }, 11),
].map((e, i) => ({ ...e, offset: i + 1 }));

const projector = (replyBytes = true): ChannelProjector =>
  new ChannelProjector(
    { kind: 'conversation', agentId: 'cap', contextId: CTX, owner: 'alice' },
    { replyBytes },
  );

describe('BeeOS lazy chunks and envelope bytes', () => {
  it('a chunk built after its whole task was projected equals the chunk built at once', () => {
    const eager = projector();
    const atOnce: Envelope[] = [];
    for (const r of log) for (const p of eager.project(r).envelopes) atOnce.push(structuredClone(p.envelope));

    const lazy = projector();
    const steps = log.map((r) => lazy.project(r).envelopes);
    const later = steps.flat().map((p) => p.envelope);

    expect(later).toEqual(atOnce);
    const chunks = steps.flat().filter((p) => p.delta);
    expect(chunks.map((p) => p.envelope.type)).toEqual([
      'agent_message_chunk',
      'agent_reasoning',
      ...Array<string>(5).fill('agent_message_chunk'),
    ]);
    // The offset is known without building the envelope, and is the envelope's.
    for (const p of steps.flat()) expect(p.offset).toBe(p.envelope.offset);
  });

  it('envelope bytes are the SSE frame of its JSON, byte for byte (non-ASCII, escapes, emoji)', () => {
    const p = projector();
    const all = log.flatMap((r) => p.project(r).envelopes.map((x) => x.envelope));
    expect(all.length).toBeGreaterThan(8);
    for (const envelope of all) {
      const expected = Buffer.from(
        encodeSse({ id: envelope.offset, event: 'message', data: JSON.stringify(envelope) }),
        'utf8',
      );
      expect(encodeEnvelopeBytes(envelope).equals(expected)).toBe(true);
    }
    const body = all.find((e) => e.type === 'agent_reply' && e.body?.includes('🌍'));
    expect(body).toBeDefined();
  });

  it('a streaming reply written from its kept body escape is encodeEnvelopeBytes of its envelope', () => {
    const p = projector();
    const steps = log.map((r) => p.project(r).envelopes);
    const fast = steps.flat().filter((x) => x.bytes);
    // Every streaming reply of turn 1 and turn 2 up to the split pair; the rest are encoded whole.
    expect(fast.length).toBeGreaterThanOrEqual(5);
    for (const x of fast) expect(x.bytes!().equals(encodeEnvelopeBytes(x.envelope))).toBe(true);
    const last = steps
      .flat()
      .filter((x) => x.envelope.type === 'agent_reply')
      .pop()!;
    expect(last.envelope.body).toBe('again\t\u0001 split 🌍 after and on');
    expect(last.bytes).toBeUndefined();
    expect(JSON.parse(encodeEnvelopeBytes(last.envelope).toString('utf8').split('data: ')[1]!).body).toBe(
      last.envelope.body,
    );
    // A JSON read's projector keeps no escape: the same envelopes, none with bytes of its own.
    const read = projector(false);
    const plain = log.flatMap((r) => read.project(r).envelopes);
    expect(plain.map((x) => x.envelope)).toEqual(steps.flat().map((x) => x.envelope));
    expect(plain.some((x) => x.bytes)).toBe(false);
  });
});
