import { describe, expect, it } from 'vitest';
import { SseFrameReader, type SseFrame } from '../../src/upstream/sse-frames.js';

const read = (chunks: (string | Buffer)[]): { frames: SseFrame[]; comments: string[] } => {
  const frames: SseFrame[] = [];
  const comments: string[] = [];
  const r = new SseFrameReader({ onFrame: (f) => frames.push(f), onComment: (c) => comments.push(c) });
  for (const c of chunks) r.push(c);
  return { frames, comments };
};

describe('SseFrameReader', () => {
  it('reads id, event and data, keeping the data line byte for byte', () => {
    const data = '{"id":"tsk_1","text":"a  b\\u0000 \\"q\\"","final":false}';
    const { frames } = read([`id: 3\nevent: text\ndata: ${data}\n\n`]);
    expect(frames).toEqual([{ event: 'text', upstreamId: '3', data }]);
  });

  it('a frame without an id line has upstreamId null; an empty id line is ""', () => {
    const { frames } = read(['event: connection-ack\ndata: {}\n\nid:\nevent: status\ndata: {}\n\n']);
    expect(frames.map((f) => f.upstreamId)).toEqual([null, '']);
  });

  it('does not inherit the previous frame id', () => {
    const { frames } = read([
      'id: 5\nevent: text\ndata: {}\n\nevent: gap\ndata: {"first_available_id":5}\n\n',
    ]);
    expect(frames[1]).toEqual({ event: 'gap', upstreamId: null, data: '{"first_available_id":5}' });
  });

  it('handles frames split anywhere, including inside a UTF-8 character', () => {
    const wire = Buffer.from('id: 1\nevent: text\ndata: {"text":"héllo ✓"}\n\n:heartbeat\n\n', 'utf8');
    for (let cut = 1; cut < wire.length; cut++) {
      const { frames, comments } = read([wire.subarray(0, cut), wire.subarray(cut)]);
      expect(frames).toEqual([{ event: 'text', upstreamId: '1', data: '{"text":"héllo ✓"}' }]);
      expect(comments).toEqual(['heartbeat']);
    }
  });

  it('reports comments without dispatching a frame', () => {
    const { frames, comments } = read([':heartbeat\n\n']);
    expect(frames).toEqual([]);
    expect(comments).toEqual(['heartbeat']);
  });

  it('tolerates CRLF line ends and a leading BOM', () => {
    const { frames } = read(['\ufeffid: 2\r\nevent: status\r\ndata: {"a":1}\r\n\r\n']);
    expect(frames).toEqual([{ event: 'status', upstreamId: '2', data: '{"a":1}' }]);
  });

  it('joins several data lines, strips only one space, defaults the event to message', () => {
    const { frames } = read(['data:  a\ndata:b\n\n']);
    expect(frames).toEqual([{ event: 'message', upstreamId: null, data: ' a\nb' }]);
  });

  it('ignores unknown fields and retry, drops frames with no data line', () => {
    const { frames } = read(['retry: 10\nfoo: bar\nevent: x\n\nevent: y\ndata: 1\n\n']);
    expect(frames).toEqual([{ event: 'y', upstreamId: null, data: '1' }]);
  });

  it('keeps an unfinished frame pending (never dispatched until its blank line)', () => {
    const r = new SseFrameReader({ onFrame: () => expect.fail('dispatched early') });
    r.push('id: 1\nevent: text\ndata: {}\n');
  });

  it('an upstream that never finishes a frame is cut off at the bound, not buffered without end', () => {
    const oversize: string[] = [];
    const frames: SseFrame[] = [];
    const r = new SseFrameReader(
      { onFrame: (f) => frames.push(f), onOversize: (m) => oversize.push(m) },
      1000,
    );
    r.push('id: 1\ndata: {}\n\n');
    for (let i = 0; i < 20; i++) r.push(`data: ${'x'.repeat(100)}\n`);
    r.push('\n');
    expect(frames.map((f) => f.upstreamId)).toEqual(['1']);
    expect(oversize.length).toBe(1);
  });
});
