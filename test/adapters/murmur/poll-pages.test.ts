/**
 * Long-poll bodies of large pages come from a shared cache (poll-pages.ts): they must be the bytes
 * pollBodyText builds, whatever the page holds and whatever cursor, head and epoch surround it.
 */
import { describe, expect, it } from 'vitest';
import { pollBodyText } from '../../../adapters/murmur/poll-json.js';
import { pollBodyBytes } from '../../../adapters/murmur/poll-pages.js';
import type { LogRecord } from '../../../src/log/record.js';
import type { LogPosition } from '../../../src/log/store.js';

const BASE = 1_700_000_000_000;

const page = (from: number, count: number, tag = ''): LogRecord[] =>
  Array.from({ length: count }, (_, i): LogRecord => {
    const offset = from + i;
    if (offset % 17 === 0)
      return {
        offset,
        kind: 'fact',
        fact: 'frames-possibly-missing',
        reason: 'gap',
        firstAvailableId: String(offset),
        receivedAt: BASE + i,
      };
    if (offset % 29 === 0)
      return {
        offset,
        kind: 'fact',
        fact: 'upstream-connected',
        ack: '{"a":1}',
        attempt: 2,
        receivedAt: BASE,
      };
    return {
      offset,
      kind: 'frame',
      event: 'text',
      upstreamId: String(i),
      // Non-ASCII, an escaped lone surrogate and invalid JSON pass through as strings.
      data: `{"text":"chunk ${i} ${tag} é ✓ \ud800 \\u0000"`,
      receivedAt: BASE + i,
    };
  });

const text = (after: number, records: LogRecord[], position: LogPosition): string =>
  Buffer.from(pollBodyBytes(after, records, position)).toString('utf8');

describe('poll page bodies', () => {
  it('are pollBodyText byte for byte: cursors, gaps, heads and epochs around one shared page', () => {
    const records = page(BASE + 1, 100);
    const positions: LogPosition[] = [
      { head: BASE + 100, first: BASE + 1, epoch: 7 },
      { head: BASE + 500, first: BASE + 1, epoch: 7 },
      { head: BASE + 500, first: BASE + 40, epoch: 9 },
    ];
    for (const position of positions)
      for (const after of [0, BASE, BASE - 10]) {
        const expected = pollBodyText(after, records, position);
        expect(text(after, records, position)).toBe(expected);
        expect(text(after, records, position)).toBe(expected); // from the cache
        expect(Buffer.from(pollBodyBytes(after, records, position))).toEqual(Buffer.from(expected, 'utf8'));
      }
  });

  it('pages of the same offsets but other record objects are built afresh, small pages too', () => {
    const position: LogPosition = { head: BASE + 200, first: BASE + 1, epoch: 3 };
    const one = page(BASE + 1, 64, 'one');
    const two = page(BASE + 1, 64, 'two');
    expect(text(BASE, one, position)).toBe(pollBodyText(BASE, one, position));
    expect(text(BASE, two, position)).toBe(pollBodyText(BASE, two, position));
    expect(text(BASE, two, position)).toContain('two');
    const small = page(BASE + 1, 5);
    expect(text(BASE, small, position)).toBe(pollBodyText(BASE, small, position));
    expect(text(BASE + 300, [], position)).toBe(pollBodyText(BASE + 300, [], position));
  });
});
