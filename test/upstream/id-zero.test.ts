/**
 * The id-0 rules' task id and per-task memory: the fast read of `{"id":"…"` must give what a parse
 * gives, whatever the data line holds, and the tracker's answers follow the spec's counter rules.
 */
import { describe, expect, it } from 'vitest';
import { IdZeroTracker, taskOf } from '../../src/upstream/id-zero.js';
import type { AlignFrame } from '../../src/upstream/replay-alignment.js';

const f = (data: string, upstreamId: string | null = '1', event = 'text'): AlignFrame =>
  ({ event, upstreamId, data }) as AlignFrame;

describe('taskOf', () => {
  it('reads the leading id as a parse would, escapes and other shapes included', () => {
    const cases = [
      '{"id":"task-1","text":"x"}',
      '{"id":"a\\"b","text":"x"}',
      '{"id":"a\\\\b"}',
      '{"id":"é🌍"}',
      '{"text":"x","id":"later"}',
      '{"id":7}',
      '{"id":""}',
      'not json',
      '{"id":"unterminated',
    ];
    for (const data of cases) {
      let parsed: string | null = null;
      try {
        const v = (JSON.parse(data) as { id?: unknown }).id;
        parsed = typeof v === 'string' ? v : null;
      } catch {
        parsed = null;
      }
      expect(taskOf(f(data)), data).toBe(parsed);
    }
  });
});

describe('IdZeroTracker', () => {
  it('flags an attempt whose id-0 frame was never seen, and only those', () => {
    const t = new IdZeroTracker();
    const d = (task: string, final = false): string => `{"id":"${task}"${final ? ',"final":true' : ''}}`;
    expect(t.note(f(d('a'), '0', 'status'))).toBe(false); // its first frame
    expect(t.note(f(d('a'), '1'))).toBe(false); // followed it
    expect(t.note(f(d('a'), '2'))).toBe(false);
    expect(t.note(f(d('b'), '1'))).toBe(true); // never saw b's id 0
    expect(t.note(f(d('a'), '1'))).toBe(true); // back to 1 after 2: a new attempt
    expect(t.note(f(d('a', true), '3', 'status'))).toBe(false);
    expect(t.note(f(d('a'), '4'))).toBe(true); // after the final status: reopened
    expect(t.note(f(d('c'), null))).toBe(false); // not a task counter
  });

  it('forgets the least recently seen tasks past its bound, never one seen within half of it', () => {
    const d = (task: string): string => `{"id":"${task}"}`;
    const t = new IdZeroTracker(4);
    for (const task of ['a', 'b', 'c', 'd', 'e']) t.note(f(d(task), '0', 'status'));
    expect(t.note(f(d('a'), '1'))).toBe(true); // a was forgotten: its id 0 looks unseen
    expect(t.note(f(d('c'), '1'))).toBe(false); // c is still known
    // A task seen again once half the bound was inserted after it moves to the young end: the two
    // new tasks then forget b and c, not a.
    const u = new IdZeroTracker(4);
    for (const task of ['a', 'b', 'c', 'd']) u.note(f(d(task), '0', 'status'));
    u.note(f(d('a'), '1')); // seen again after 3 newer tasks: moves to the young end
    u.note(f(d('e'), '0', 'status'));
    u.note(f(d('f'), '0', 'status'));
    expect(u.note(f(d('a'), '2'))).toBe(false); // a kept through 2 newer tasks (half the bound)
    expect(u.note(f(d('b'), '1'))).toBe(true); // b and c, not seen since, were forgotten
    expect(u.note(f(d('c'), '1'))).toBe(true);
  });
});
