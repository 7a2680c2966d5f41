/**
 * recordOf: what the Redis store hands its own tail for an entry it just appended must be exactly
 * what any other reader decodes from the stream (decodeRecord of the same bytes).
 */
import { describe, expect, it } from 'vitest';
import { decodeRecord, encodeEntry, recordOf, type LogEntry } from '../../src/log/record.js';

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
