/**
 * The one SSE encoder (src/http/sse.ts): one-line data passes through as one `data:` line (the
 * fast path every JSON payload takes), any CR, LF or CRLF splits data into lines, and `id`/`event`
 * refuse line breaks.
 */
import { describe, expect, it } from 'vitest';
import { encodeComment, encodeSse } from '../../src/http/sse.js';

describe('encodeSse', () => {
  it('writes one-line data as one data line, after id and event, with the chosen separator', () => {
    expect(encodeSse({ id: 7, event: 'text', data: '{"a":"b\\nc"}' })).toBe(
      'id: 7\nevent: text\ndata: {"a":"b\\nc"}\n\n',
    );
    expect(encodeSse({ data: '[1,2]' }, '')).toBe('data:[1,2]\n\n');
    expect(encodeSse({ id: null, event: null, data: '' })).toBe('data: \n\n');
  });

  it('splits data on LF, CRLF and CR alike', () => {
    expect(encodeSse({ data: 'a\nb\r\nc\rd' })).toBe('data: a\ndata: b\ndata: c\ndata: d\n\n');
    expect(encodeSse({ event: 'x', data: 'tail\n' }, '')).toBe('event: x\ndata:tail\ndata:\n\n');
  });

  it('refuses a line break in id, event or a comment', () => {
    expect(() => encodeSse({ id: 'a\nb', data: '' })).toThrow('SSE id must not contain a line break');
    expect(() => encodeSse({ event: 'a\rb', data: '' })).toThrow('SSE event must not contain a line break');
    expect(() => encodeComment('a\r\nb')).toThrow('SSE comment must not contain a line break');
    expect(encodeComment('heartbeat')).toBe(':heartbeat\n\n');
  });
});
