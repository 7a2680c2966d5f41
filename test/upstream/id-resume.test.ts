/**
 * Resume by id on 0.4 and later: the one-frame check that the replay continues the stored session,
 * duplicates dropped by id, a hole or `lagged` ending the connection for a replay, and a `gap` as
 * the only source of a loss fact, with the count the ids prove.
 */
import { describe, expect, it } from 'vitest';
import { IdResume, resumeFrom, type IdResumeOutput } from '../../src/upstream/id-resume.js';
import type { SseFrame } from '../../src/upstream/sse-frames.js';

const f = (id: number | null, data = `d${id}`, event = 'text'): SseFrame => ({
  event,
  upstreamId: id === null ? null : String(id),
  data,
});

const run = (
  input: {
    lastId: bigint | null;
    lastFrame?: SseFrame | null;
    hasHistory?: boolean;
    newSession?: boolean;
    lagged?: boolean;
  },
  feed: (r: IdResume) => void,
): IdResumeOutput[] => {
  const out: IdResumeOutput[] = [];
  const r = new IdResume({
    lastFrame: null,
    hasHistory: true,
    newSession: false,
    lagged: false,
    ...input,
    emit: (o) => out.push(o),
  });
  feed(r);
  return out;
};

const frames = (out: IdResumeOutput[]) =>
  out.flatMap((o) => (o.kind === 'frame' ? [o.frame.upstreamId] : []));

describe('IdResume', () => {
  it('asks for the last stored frame again, or for everything', () => {
    expect(resumeFrom({ lastId: 40n, newSession: false })).toBe('39');
    expect(resumeFrom({ lastId: 1n, newSession: false })).toBe('0');
    expect(resumeFrom({ lastId: null, newSession: false })).toBe('0');
    expect(resumeFrom({ lastId: 40n, newSession: true })).toBe('0');
  });

  it('continues the stored session: frame L checked and dropped, later ids released once, in order', () => {
    const out = run({ lastId: 3n, lastFrame: f(3) }, (r) => {
      for (const id of [3, 4, 5, 4, 6]) r.push(f(id));
      r.push(f(null, '{"state":"rejected"}', 'status'));
    });
    expect(frames(out)).toEqual(['4', '5', '6', null]);
    expect(out.some((o) => o.kind === 'missing' || o.kind === 'new-session')).toBe(false);
  });

  it('a different frame at L, a lower id or a higher id without a gap is another session', () => {
    for (const first of [f(3, 'other'), f(1), f(9)]) {
      const out = run({ lastId: 3n, lastFrame: f(3) }, (r) => r.push(first));
      expect(out).toEqual([{ kind: 'reconnect', reason: 'another session' }]);
    }
  });

  it('a gap naming an id at or below L is another session: the cursor was never issued there', () => {
    // A fresh session with an empty buffer answers cursor 11 with `gap` 1; one that wrote 5 frames, `gap` 1 too.
    for (const first of ['1', '12']) {
      const out = run({ lastId: 12n, lastFrame: f(12) }, (r) => {
        r.gap({ firstAvailableId: first });
        r.push(f(1));
      });
      expect(out).toEqual([{ kind: 'reconnect', reason: 'another session' }]);
    }
  });

  it('a new session replays from 0 as a new stretch of the log: the restart is said, every frame kept', () => {
    const out = run({ lastId: 3n, lastFrame: f(3), newSession: true }, (r) => {
      for (const id of [1, 2, 3]) r.push(f(id, `new${id}`));
    });
    expect(out.slice(0, 2)).toEqual([
      { kind: 'missing', fact: { reason: 'capsule-restarted' } },
      { kind: 'new-session' },
    ]);
    expect(frames(out)).toEqual(['1', '2', '3']);
  });

  it('a hole in the ids or a lagged frame ends the connection for a replay; lagged never reaches the log', () => {
    expect(
      run({ lastId: 3n, lastFrame: f(3) }, (r) => [3, 4, 6, 7].forEach((id) => r.push(f(id)))).at(-1),
    ).toEqual({
      kind: 'reconnect',
      reason: 'id hole',
    });
    const lagged = run({ lastId: 3n, lastFrame: f(3) }, (r) => {
      r.push(f(3));
      r.push(f(4));
      r.push(f(null, '{"missed":12}', 'lagged'));
      r.push(f(17));
    });
    expect(frames(lagged)).toEqual(['4']);
    expect(lagged.at(-1)).toEqual({ kind: 'reconnect', reason: 'lagged' });
  });

  it('a gap is the one loss fact, with the count the ids prove, labelled lagged after a lagging connection', () => {
    const out = run({ lastId: 3n, lastFrame: f(3), lagged: true }, (r) => {
      r.gap({ firstAvailableId: '10' });
      for (const id of [10, 11]) r.push(f(id));
    });
    expect(out[0]).toEqual({ kind: 'missing', fact: { reason: 'lagged', firstAvailableId: '10', count: 6 } });
    expect(frames(out)).toEqual(['10', '11']);
    const cold = run({ lastId: null, hasHistory: false }, (r) => r.gap({ firstAvailableId: '5' }));
    expect(cold).toEqual([
      { kind: 'missing', fact: { reason: 'cold-attach', firstAvailableId: '5', count: 4 } },
    ]);
  });
});
