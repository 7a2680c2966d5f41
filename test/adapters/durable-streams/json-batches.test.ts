/**
 * A JSON append's messages (§7.1): one per element of a top-level array, each its compact
 * serialisation. A batch that arrives as it serialises is split into slices of the body; any other is
 * parsed and serialised element by element. Both must give exactly `JSON.stringify` of each element,
 * whatever the elements hold (strings with quotes, backslashes, brackets and commas; nesting;
 * multi-byte UTF-8; numbers that serialise differently from how they were written).
 */
import { describe, expect, it } from 'vitest';
import { jsonMessages } from '../../../adapters/durable-streams/stream-input.js';

/** A body in memory of its own (not the pool small buffers share), so that a slice of it is known by its memory. */
const bodyOf = (text: string): Buffer => {
  const body = Buffer.alloc(Buffer.byteLength(text));
  body.write(text);
  return body;
};

const messagesOf = (text: string): string[] => {
  const parsed = jsonMessages(Buffer.from(text, 'utf8'), { allowEmptyArray: false });
  if (!parsed.ok) throw new Error(parsed.error.message);
  return parsed.value.map((m) => m.toString('utf8'));
};

const expected = (text: string): string[] => (JSON.parse(text) as unknown[]).map((v) => JSON.stringify(v));

/** Values whose serialisations hold every character the split must step over. */
const TRICKY: unknown[] = [
  'plain',
  '',
  'a,b',
  '[not] {an} "array", really',
  'ends with a backslash \\',
  '\\',
  '\\\\',
  '\\"',
  'quote " inside',
  '"',
  '\u0000\u001f\n\t',
  'é 漢字 🦜',
  0,
  -1.5e-7,
  1e21,
  true,
  false,
  null,
  [],
  {},
  [[[]], {}],
  { a: [1, { b: 'c,d]' }], 'k"ey': '\\', '': { '': [] } },
  [',', ']', '}', '{', '['],
];

describe('JSON batches split into messages', () => {
  it('gives each element its compact serialisation, as slices of a body sent as it serialises', () => {
    const text = JSON.stringify(TRICKY);
    const body = bodyOf(text);
    const parsed = jsonMessages(body, { allowEmptyArray: false });
    if (!parsed.ok) throw new Error(parsed.error.message);
    expect(parsed.value.map((m) => m.toString('utf8'))).toEqual(expected(text));
    // Slices, not copies: every message lies in the body's own memory.
    for (const m of parsed.value) expect(m.buffer).toBe(body.buffer);
  });

  it('serialises each element again when the body is not its compact serialisation', () => {
    for (const text of [
      '[ 1, 2 ]',
      '[1.0,2e0,-0]',
      '["\\u0041","\\/"]',
      '[{"a":1,"a":2}]',
      '[\n  {"a": [1, 2]},\n  "x"\n]',
    ]) {
      const body = bodyOf(text);
      const parsed = jsonMessages(body, { allowEmptyArray: false });
      if (!parsed.ok) throw new Error(parsed.error.message);
      expect(parsed.value.map((m) => m.toString('utf8'))).toEqual(expected(text));
      for (const m of parsed.value) expect(m.buffer).not.toBe(body.buffer);
    }
  });

  it('agrees with element-wise serialisation on generated batches', () => {
    // A fixed-seed generator: the same 500 batches every run.
    let seed = 42;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const chars = ['a', ',', '"', '\\', '[', ']', '{', '}', ':', ' ', 'é', '🦜', '\n'];
    const value = (depth: number): unknown => {
      switch (depth > 3 ? rand(4) : rand(6)) {
        case 0:
          return Array.from({ length: rand(6) }, () => chars[rand(chars.length)]).join('');
        case 1:
          return rand(1000) - 500 + rand(100) / 100;
        case 2:
          return [true, false, null][rand(3)];
        case 3:
          return Array.from({ length: rand(4) }, () => chars[rand(chars.length)]).join('\\');
        case 4:
          return Array.from({ length: rand(4) }, () => value(depth + 1));
        default:
          return Object.fromEntries(
            Array.from({ length: rand(4) }, (_, k) => [`${chars[rand(chars.length)]}${k}`, value(depth + 1)]),
          );
      }
    };
    for (let n = 0; n < 500; n++) {
      const batch = Array.from({ length: 1 + rand(8) }, () => value(0));
      const text = JSON.stringify(batch);
      expect(messagesOf(text)).toEqual(expected(text));
    }
  });

  it('keeps the refusals of a batch that appends nothing or is no JSON', () => {
    const refused = (text: string): string => {
      const parsed = jsonMessages(Buffer.from(text, 'utf8'), { allowEmptyArray: false });
      return parsed.ok ? 'accepted' : parsed.error.message;
    };
    expect(refused('[]')).toBe('an empty JSON array appends nothing');
    expect(refused('[1,]')).toBe('body is not valid JSON');
    expect(jsonMessages(Buffer.from('[]'), { allowEmptyArray: true })).toEqual({ ok: true, value: [] });
  });
});
