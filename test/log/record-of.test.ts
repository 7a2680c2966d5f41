/**
 * The entry encoding (compact frames, JSON for the rest and for old logs), and recordOf: what the
 * Redis store hands its own tail for an entry it just appended must be exactly what any other
 * reader decodes from the stream (decodeRecord of the same bytes).
 */
import { describe, expect, it } from 'vitest';
import { decodeRecord, encodeEntry, recordOf, type FrameEntry, type LogEntry } from '../../src/log/record.js';

const entries: LogEntry[] = [
  {
    kind: 'frame',
    event: 'text',
    upstreamId: '42',
    data: '{"id":"t1","text":"wörld 🌍 \\"q\\""}',
    receivedAt: 1,
  },
  {
    kind: 'frame',
    event: 'error',
    upstreamId: null,
    data: 'not json \u2028 \ud800',
    receivedAt: 1_700_000_000_123,
  },
  { kind: 'fact', fact: 'frames-possibly-missing', reason: 'gap', firstAvailableId: '7', receivedAt: 2 },
  {
    kind: 'submission',
    protocol: 'beeos',
    owner: null,
    contextId: 'c',
    messageId: 'm',
    text: 'hi',
    meta: { beeos: { op: 'message' } },
    receivedAt: 3,
  },
];

describe('recordOf', () => {
  it('equals decodeRecord of the encoded entry, key order included, for every kind', () => {
    for (const [i, entry] of entries.entries()) {
      const encoded = encodeEntry(entry);
      const got = recordOf(entry, encoded, i + 10);
      const want = decodeRecord(encoded, i + 10);
      expect(got).toStrictEqual(want);
      expect(Object.keys(got)).toEqual(Object.keys(want));
      expect(JSON.stringify(got)).toBe(JSON.stringify(want));
    }
  });
});

describe('encodeEntry / decodeRecord', () => {
  const frame = (over: Partial<FrameEntry> = {}): FrameEntry => ({
    kind: 'frame',
    event: 'text',
    upstreamId: '4611686018427391871',
    data: '{"id":"tsk_1","text":"a\\tb \\"q\\" \\u00e9","final":false}',
    receivedAt: 1_796_180_925_045,
    ...over,
  });

  it('stores a frame as tab-separated fields with its data line unescaped', () => {
    const f = frame();
    expect(encodeEntry(f)).toBe(`f\ttext\t=4611686018427391871\t1796180925045\t${f.data}`);
    expect(encodeEntry(frame({ upstreamId: null }))).toBe(`f\ttext\t\t1796180925045\t${f.data}`);
    expect(encodeEntry(frame({ upstreamId: '' }))).toBe(`f\ttext\t=\t1796180925045\t${f.data}`);
  });

  it('round-trips every frame, tabs in the data, null, empty and "=" ids included', () => {
    const cases = [
      frame(),
      frame({ upstreamId: null }),
      frame({ upstreamId: '' }),
      frame({ upstreamId: '=7' }),
      frame({ event: '', data: '' }),
      frame({ data: '\t\t{"a":1}\t' }),
      frame({ receivedAt: 0 }),
      frame({ receivedAt: -5 }),
    ];
    for (const f of cases) expect(decodeRecord(encodeEntry(f), 9)).toStrictEqual({ ...f, offset: 9 });
  });

  it('falls back to JSON for a frame the compact form cannot carry, and reads it back whole', () => {
    const cases = [
      frame({ event: 'te\txt' }),
      frame({ upstreamId: '1\t2' }),
      frame({ data: 'lone \ud800 surrogate' }),
      frame({ event: 'x\udc00' }),
      frame({ receivedAt: 1.5 }),
    ];
    for (const f of cases) {
      const encoded = encodeEntry(f);
      expect(encoded).toBe(JSON.stringify(f));
      expect(decodeRecord(encoded, 3)).toStrictEqual({ ...f, offset: 3 });
    }
  });

  it('still reads frames stored as JSON before the compact form (a log written by an older gateway)', () => {
    const f = frame();
    const got = decodeRecord(JSON.stringify(f), 4);
    expect(got).toStrictEqual(decodeRecord(encodeEntry(f), 4));
    expect(Object.keys(got)).toEqual(['kind', 'event', 'upstreamId', 'data', 'receivedAt', 'offset']);
  });
});
