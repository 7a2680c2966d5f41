import { describe, expect, it } from 'vitest';
import {
  countUnreplayedIdZero,
  overlapLengths,
  reconcile,
  type AlignFrame,
  type ReconcileInput,
} from './reconcile.js';

// Frame builders. `s(task, id)` is a status, `t(task, id, text)` a text chunk; ids as the capsule writes them.
const s = (task: string, id: number | string, state = 'working'): AlignFrame => ({
  event: 'status',
  upstreamId: String(id),
  data: `{"id":"${task}","context_id":"ctx_${task}","status":{"state":"${state}","message":"m"},"final":false}`,
});
const t = (task: string, id: number | string, text = 'x'): AlignFrame => ({
  event: 'text',
  upstreamId: String(id),
  data: `{"id":"${task}","text":"${text}","final":false}`,
});
const INPUT_WAIT = '9223372036854775807';

const input = (over: Partial<ReconcileInput>): ReconcileInput => ({
  storedTail: [],
  hasHistory: true,
  lastEventId: '0',
  gap: null,
  replay: [],
  bufferSize: 512,
  ...over,
});

// One task attempt: w0 (id 0, never replayed from 0), then four replayable frames.
const attempt = (task: string): AlignFrame[] => [
  s(task, 0),
  t(task, 1, 'think'),
  t(task, 2, 'Echo:'),
  t(task, 3, ' hi'),
  s(task, 4, 'completed'),
];
const replayable = (frames: AlignFrame[]): AlignFrame[] => frames.filter((f) => f.upstreamId !== '0');

describe('reconcile', () => {
  const A = attempt('A');
  const B = attempt('B');

  const cases: {
    name: string;
    in: Partial<ReconcileInput>;
    append: AlignFrame[];
    missing: unknown[];
    /** Indexes of `append` preceded by an id-0-unreplayable fact. */
    zeroAt?: number[];
    newSession?: boolean;
  }[] = [
    {
      name: 'cold attach: everything appended, cold-attach fact',
      in: { hasHistory: false, replay: replayable(A) },
      append: replayable(A),
      missing: [{ reason: 'cold-attach' }],
    },
    {
      name: 'cold attach behind a gap keeps first_available_id',
      in: { hasHistory: false, gap: { firstAvailableId: '7' }, replay: [t('A', 7)] },
      append: [t('A', 7)],
      missing: [{ reason: 'cold-attach', firstAvailableId: '7' }],
    },
    {
      name: 'cold attach with an empty replay still says what is unknown',
      in: { hasHistory: false },
      append: [],
      missing: [{ reason: 'cold-attach' }],
    },
    {
      name: 'exact continuation: only the new frame',
      in: { storedTail: A.slice(0, 3), replay: replayable(A) },
      append: A.slice(3),
      missing: [],
    },
    {
      name: 'nothing new',
      in: { storedTail: A, replay: replayable(A) },
      append: [],
      missing: [],
    },
    {
      name: 'partial overlap: the buffer evicted the oldest stored frames',
      in: { storedTail: [...A, ...B.slice(0, 3)], replay: [...replayable(A).slice(2), ...replayable(B)] },
      append: B.slice(3),
      missing: [],
    },
    {
      name: 'stored id-0 frames are filtered out before aligning',
      in: { storedTail: [...A, B[0]!, B[1]!], replay: [...replayable(A), ...replayable(B)] },
      append: B.slice(2),
      missing: [],
    },
    {
      name: 'empty inputs with history: nothing at all',
      in: {},
      append: [],
      missing: [],
    },
    {
      name: 'idle capsule whose session only wrote id-0 frames: empty replay is not a restart',
      in: { storedTail: [s('H', 0)] },
      append: [],
      missing: [],
    },
    {
      name: 'replayable frames stored, empty replay: the capsule restarted',
      in: { storedTail: A },
      append: [],
      missing: [{ reason: 'capsule-restarted' }],
      newSession: true,
    },
    {
      name: 'a replay that is the whole (new) session and does not continue ours: restarted',
      in: { storedTail: A, replay: replayable(B) },
      append: replayable(B),
      missing: [{ reason: 'capsule-restarted' }],
      zeroAt: [0],
      newSession: true,
    },
    {
      name: 'a full buffer sharing nothing with the stored tail: no-overlap',
      in: { storedTail: A, replay: replayable(B), bufferSize: 7 },
      append: replayable(B),
      missing: [{ reason: 'no-overlap' }],
      zeroAt: [0],
    },
    {
      name: 'gap without overlap: gap fact with first_available_id',
      in: { storedTail: A, gap: { firstAvailableId: '2' }, replay: B.slice(2) },
      append: B.slice(2),
      missing: [{ reason: 'gap', firstAvailableId: '2' }],
    },
    {
      name: 'gap with overlap: aligned on the unfiltered buffer, id-0 frames included, no loss',
      in: {
        storedTail: [...A, B[0]!],
        gap: { firstAvailableId: '3' },
        replay: [...A.slice(3), B[0]!, B[1]!],
      },
      append: [B[1]!],
      missing: [],
    },
    {
      // The overlap, A's final alone, could be a reopened attempt's final (byte for byte the same),
      // the buffer having evicted everything else of it: said so.
      name: 'gap replay brings back an id-0 frame we never had; an overlap inside one task is not proof',
      in: { storedTail: A, gap: { firstAvailableId: '4' }, replay: [A[4]!, B[0]!, B[1]!] },
      append: [B[0]!, B[1]!],
      missing: [{ reason: 'no-overlap', firstAvailableId: '4' }],
    },
    {
      name: 'gap replay holding an id-0 frame we lost earlier still aligns (on the id > 0 frames)',
      in: {
        storedTail: [...A.slice(1), B[0]!],
        gap: { firstAvailableId: '0' },
        replay: [...A, B[0]!, B[1]!],
      },
      append: [B[1]!],
      missing: [],
    },
    {
      name: 'gap replay: an id-0 frame after the overlap that we never had is appended in place',
      in: { storedTail: A.slice(1), gap: { firstAvailableId: '2' }, replay: [...A.slice(2), B[0]!, B[1]!] },
      append: [B[0]!, B[1]!],
      // A.1 is gone from the buffer and the overlap lies inside A: a reopened attempt could match it.
      missing: [{ reason: 'no-overlap', firstAvailableId: '2' }],
    },
    {
      name: 'gap replay repeating the id-0 frame we stored live after our last key frame: the overlap spans two tasks',
      in: {
        storedTail: [...A.slice(1), B[0]!],
        gap: { firstAvailableId: '2' },
        replay: [...A.slice(2), B[0]!, B[1]!],
      },
      append: [B[1]!],
      missing: [],
    },
    {
      name: 'nothing stored in this session, replay is the whole session: all of it, id-0 loss noted',
      in: { replay: replayable(B) },
      append: replayable(B),
      missing: [],
      zeroAt: [0],
    },
    {
      name: 'nothing stored in this session, buffer may have evicted: no-overlap',
      in: { replay: replayable(B), bufferSize: 6 },
      append: replayable(B),
      missing: [{ reason: 'no-overlap' }],
      zeroAt: [0],
    },
    {
      name: 'a reopened attempt repeating the first byte for byte is kept',
      in: { storedTail: A, replay: [...replayable(A), ...replayable(A)] },
      append: replayable(A),
      missing: [],
      zeroAt: [0],
    },
    {
      name: 'reopened attempt seen starting live: continue it, no id-0 loss',
      in: { storedTail: [...A, A[0]!, A[1]!], replay: [...replayable(A), ...replayable(A)] },
      append: A.slice(2),
      missing: [],
    },
    {
      name: 'repeated identical frames, whole session: the longest overlap is certain',
      in: { storedTail: [t('R', 5), t('R', 5)], replay: [t('R', 5), t('R', 5), t('R', 5)] },
      append: [t('R', 5)],
      missing: [],
    },
    {
      name: 'repeated identical frames, buffer may have evicted: ambiguous, said so',
      in: {
        storedTail: [t('R', 5), t('R', 5)],
        replay: [t('R', 5), t('R', 5), t('R', 5)],
        bufferSize: 4,
      },
      append: [t('R', 5)],
      missing: [{ reason: 'no-overlap' }],
    },
    {
      // The buffer (6) evicted the rest of attempt 1 and the start of attempt 2, which repeats attempt
      // 1 byte for byte: the replay's start matches our tail exactly as if nothing were missing.
      name: 'a full buffer whose overlap lies inside one task: a reopened attempt could match it, said so',
      in: {
        storedTail: [t('A', 1, 'a'), t('A', 2, 'b')],
        replay: [t('A', 1, 'a'), t('A', 2, 'b'), t('A', 3, 'c'), s('A', 4, 'completed'), t('B', 1, 'd')],
        bufferSize: 6,
      },
      append: [t('A', 3, 'c'), s('A', 4, 'completed'), t('B', 1, 'd')],
      missing: [{ reason: 'no-overlap' }],
      zeroAt: [2],
    },
    {
      name: 'a full buffer whose overlap spans two tasks: no repeat can match it, nothing said',
      in: {
        storedTail: [s('Z', 3, 'completed'), t('A', 1, 'a'), t('A', 2, 'b')],
        replay: [s('Z', 3, 'completed'), t('A', 1, 'a'), t('A', 2, 'b'), t('A', 3, 'c'), t('A', 4, 'e')],
        bufferSize: 6,
      },
      append: [t('A', 3, 'c'), t('A', 4, 'e')],
      missing: [],
    },
    {
      name: 'overlap of length 1 that is the only alignment is taken (inside one task, after evicted frames: said so)',
      in: { storedTail: [t('A', 1, 'p'), t('A', 2, 'a')], replay: [t('A', 2, 'a'), t('A', 3, 'q')] },
      append: [t('A', 3, 'q')],
      missing: [{ reason: 'no-overlap' }],
    },
    {
      name: 'overlap of length 1 competing with a longer one (periodic tail) is ambiguous when evicted',
      in: {
        storedTail: [t('A', 1, 'a'), t('A', 2, 'b'), t('A', 1, 'a')],
        replay: [t('A', 1, 'a'), t('A', 2, 'b'), t('A', 1, 'a'), t('A', 3, 'c')],
        bufferSize: 6,
      },
      append: [t('A', 3, 'c')],
      missing: [{ reason: 'no-overlap' }],
    },
    {
      name: 'data compared byte for byte: a whitespace difference is a different frame',
      in: {
        storedTail: [{ event: 'text', upstreamId: '7', data: '{"id":"A","text":"x"}' }],
        replay: [{ event: 'text', upstreamId: '7', data: '{"id":"A", "text":"x"}' }],
      },
      append: [{ event: 'text', upstreamId: '7', data: '{"id":"A", "text":"x"}' }],
      missing: [{ reason: 'capsule-restarted' }],
      newSession: true,
    },
    {
      name: 'same data under another id or event is a different frame',
      in: {
        storedTail: [t('A', 1), t('A', 2)],
        replay: [t('A', 2), { ...t('A', 2), event: 'thinking' }],
      },
      append: [{ ...t('A', 2), event: 'thinking' }],
      // The overlap (A.2) lies inside one task, after A.1 the buffer no longer holds.
      missing: [{ reason: 'no-overlap' }],
    },
    {
      name: 'a live frame taken for replay is simply appended after the replay',
      in: { storedTail: A.slice(0, 4), replay: [...replayable(A), t('A', 5, 'live')] },
      append: [A[4]!, t('A', 5, 'live')],
      missing: [],
    },
  ];

  for (const c of cases) {
    it(c.name, () => {
      const r = reconcile(input(c.in));
      expect(r.append).toEqual(c.append);
      expect(r.missing).toEqual(c.missing);
      expect(r.newSession).toBe(c.newSession ?? false);
      expect(r.missingAt).toEqual(
        (c.zeroAt ?? []).map((index) => ({ index, fact: { reason: 'id-zero-unreplayable', count: 1 } })),
      );
    });
  }

  it('reports the overlap length it dropped', () => {
    expect(reconcile(input({ storedTail: A.slice(0, 3), replay: replayable(A) })).overlap).toBe(2);
  });
});

describe('overlapLengths', () => {
  const a = t('A', 1, 'a');
  const b = t('A', 2, 'b');
  const c = t('A', 3, 'c');
  it.each([
    { stored: [a, b, a, b], replay: [a, b, a, b, c], want: [4, 2] },
    { stored: [a, a, a], replay: [a, a], want: [2, 1] },
    { stored: [c, a], replay: [a, b], want: [1] },
    { stored: [a, b], replay: [c], want: [] },
    { stored: [], replay: [a], want: [] },
    { stored: [a], replay: [], want: [] },
  ])('$want', ({ stored, replay, want }) => {
    expect(overlapLengths(stored, replay)).toEqual(want);
  });
});

describe('countUnreplayedIdZero', () => {
  it('an input wait between id 0 and id 1 does not hide the id-0 frame we hold', () => {
    const stored = [s('T', 0)];
    const appended = [s('T', INPUT_WAIT, 'input-required'), s('T', '9223372036854775808'), t('T', 1)];
    expect(countUnreplayedIdZero(stored, appended)).toBe(0);
  });
  it('counts one per attempt whose start was missed, also for tasks never seen', () => {
    expect(
      countUnreplayedIdZero([s('T', 0), t('T', 1), s('T', 2, 'completed')], [t('T', 1), t('U', 1)]),
    ).toBe(2);
  });
  it('an id repeated within an attempt (whole reply, then completed, both id 1) is not a new attempt', () => {
    expect(countUnreplayedIdZero([s('T', 0)], [t('T', 1, 'whole'), s('T', 1, 'completed')])).toBe(0);
  });
  it('frames whose data is not JSON are ignored', () => {
    expect(countUnreplayedIdZero([], [{ event: 'text', upstreamId: '1', data: 'not json' }])).toBe(0);
  });
});
