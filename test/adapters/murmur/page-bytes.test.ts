/**
 * A replay page's shared bytes (page-bytes.ts) are what the per-record path writes for replayed
 * records: every record's event in order, no capsule-closed, possibly-missing gaps only with `gaps`,
 * a replayed final status written like any frame. Cached per page array.
 */
import { describe, expect, it } from 'vitest';
import { encodeRecord } from '../../../adapters/murmur/codec.js';
import { batchMayEnd, pageBytes } from '../../../adapters/murmur/page-bytes.js';
import type { LogRecord } from '../../../src/log/record.js';

const at = 1_700_000_000_000;
const page: LogRecord[] = [
  { offset: 1, kind: 'frame', event: 'status', upstreamId: '0', data: '{"state":"working"}', receivedAt: at },
  { offset: 2, kind: 'frame', event: 'text', upstreamId: '1', data: '{"text":"é ✓"}', receivedAt: at },
  {
    offset: 3,
    kind: 'fact',
    fact: 'frames-possibly-missing',
    reason: 'gap',
    firstAvailableId: '9',
    receivedAt: at,
  },
  { offset: 4, kind: 'fact', fact: 'upstream-connected', ack: '{}', attempt: 1, receivedAt: at },
  {
    offset: 5,
    kind: 'frame',
    event: 'status',
    upstreamId: '2',
    data: '{"state":"completed","final":true}',
    receivedAt: at,
  },
  { offset: 6, kind: 'fact', fact: 'capsule-closed', receivedAt: at },
  { offset: 7, kind: 'frame', event: 'error', upstreamId: null, data: 'not json', receivedAt: at },
];

const expected = (gaps: boolean): Buffer =>
  Buffer.concat(
    page
      .filter((r) => !(r.kind === 'fact' && r.fact === 'capsule-closed'))
      .filter((r) => gaps || !(r.kind === 'fact' && r.fact === 'frames-possibly-missing'))
      .map((r) => encodeRecord(r))
      .filter((b): b is Buffer => b !== null),
  );

describe('replay page bytes', () => {
  it('are the replayed records’ events in order, with and without gaps, shared per page', () => {
    const withGaps = pageBytes(page, true);
    const without = pageBytes(page, false);
    expect(withGaps).toEqual(expected(true));
    expect(without).toEqual(expected(false));
    expect(withGaps!.toString()).toContain('event: gap');
    expect(without!.toString()).not.toContain('event: gap');
    expect(pageBytes(page, true)).toBe(withGaps);
    expect(pageBytes(page, false)).toBe(without);
  });

  it('is null for a page with nothing to write', () => {
    expect(pageBytes([page[5]!], false)).toBeNull();
  });
});

describe('batchMayEnd', () => {
  it('is true for a batch with capsule-closed, and with a final status only where finals end streams', () => {
    expect(batchMayEnd(page, false)).toBe(true);
    const noClose = page.filter((r) => !(r.kind === 'fact' && r.fact === 'capsule-closed'));
    expect(batchMayEnd(noClose, false)).toBe(false);
    expect(batchMayEnd(noClose, true)).toBe(true);
    const plain = noClose.filter((r) => r.offset !== 5);
    expect(batchMayEnd(plain, true)).toBe(false);
  });
});
