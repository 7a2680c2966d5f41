/**
 * The streaming aligner decides duplicate vs new by content only: the same replay (and the live
 * frames after it) fed with the timing hint and heartbeats landing anywhere — before the replay,
 * inside the overlap, after it — gives the same frames, and exactly the history we did not hold.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdZeroTracker } from '../../src/upstream/id-zero.js';
import {
  ReplayAligner,
  type AlignFrame,
  type AlignOutput as AlignerOutput,
  type ReconnectOutput,
} from '../../src/upstream/replay-alignment.js';

type AlignOutput = AlignerOutput | ReconnectOutput;

const frame = (task: string, id: number, n: number, final = false): AlignFrame => ({
  event: id === 0 || final ? 'status' : 'text',
  upstreamId: String(id),
  data: final
    ? `{"id":"${task}","status":{"state":"completed"},"final":true}`
    : `{"id":"${task}","text":"${n}","final":false}`,
});

/** A session's history: tasks of 1..7 frames after their id-0 status; some reopen byte for byte. */
const historyArb = fc
  .array(fc.record({ frames: fc.integer({ min: 1, max: 7 }), reopen: fc.boolean() }), {
    minLength: 1,
    maxLength: 8,
  })
  .map((tasks) =>
    tasks.flatMap((t, i) => {
      const attempt = [frame(`T${i}`, 0, 0)];
      for (let id = 1; id < t.frames; id++) attempt.push(frame(`T${i}`, id, id));
      attempt.push(frame(`T${i}`, t.frames, t.frames, true));
      return t.reopen ? [...attempt, ...attempt] : attempt;
    }),
  );

interface Scenario {
  history: AlignFrame[];
  stored: AlignFrame[];
  /** What the connection delivers: the replay, then live frames. */
  stream: AlignFrame[];
  replayLength: number;
  /** The frames a correct aligner appends. */
  expected: AlignFrame[];
}

const scenarioArb = historyArb.chain((history) =>
  fc
    .record({
      stored: fc.integer({ min: 1, max: history.length }),
      away: fc.integer({ min: 0, max: history.length }),
    })
    .map(({ stored, away }): Scenario => {
      const reconnect = Math.min(history.length, stored + away);
      // A buffer large enough to hold the whole session: no eviction, no gap (spec "Replay").
      const replay = history.slice(0, reconnect).filter((f) => f.upstreamId !== '0');
      const live = history.slice(reconnect);
      const missedWhileAway = history.slice(stored, reconnect).filter((f) => f.upstreamId !== '0');
      return {
        history,
        stored: history.slice(0, stored),
        stream: [...replay, ...live],
        replayLength: replay.length,
        expected: [...missedWhileAway, ...live],
      };
    }),
);

/** Feed a scenario; `hints` and `beats` are stream positions where the timing hint / a heartbeat land. */
const run = (s: Scenario, hints: number[], beats: number[]): AlignOutput[] => {
  const out: AlignOutput[] = [];
  const idZero = new IdZeroTracker();
  for (const f of s.stored) idZero.note(f);
  const aligner = new ReplayAligner({
    storedTail: s.stored,
    hasHistory: true,
    bufferSize: 512,
    idZero,
    emit: (o) => out.push(o),
  });
  for (let i = 0; i <= s.stream.length; i++) {
    for (const h of hints) if (h === i) aligner.hint();
    for (const b of beats) if (b === i) aligner.comment();
    if (i < s.stream.length) aligner.push(s.stream[i]!);
  }
  aligner.comment(); // the next heartbeat: the replay is certainly over
  aligner.close();
  return out;
};

const framesOf = (out: AlignOutput[]): AlignFrame[] =>
  out.flatMap((o) => (o.kind === 'frame' ? [o.frame] : []));

describe('ReplayAligner: any split in time, same log', () => {
  it('random hint and heartbeat placements give the same frames, exactly the ones we lacked', () => {
    fc.assert(
      fc.property(
        scenarioArb.chain((s) =>
          fc.record({
            s: fc.constant(s),
            hints: fc.array(fc.integer({ min: 0, max: s.stream.length }), { maxLength: 3 }),
            // A heartbeat is never written inside the replay: only from its end on.
            beats: fc.array(fc.integer({ min: s.replayLength, max: s.stream.length }), { maxLength: 2 }),
          }),
        ),
        ({ s, hints, beats }) => {
          const reference = run(s, [], []);
          const got = run(s, hints, beats);
          expect(framesOf(got)).toEqual(framesOf(reference));
          // The labels may only depend on timing when the first hint came before the replay's end.
          if (hints.every((h) => h >= s.replayLength)) expect(got).toEqual(reference);
          const facts = reference.filter((o) => o.kind !== 'frame');
          const ambiguous = facts.some((o) => o.kind === 'missing' && o.fact.reason === 'no-overlap');
          if (!ambiguous) expect(framesOf(got)).toEqual(s.expected);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('a replay stalled before its first frame is not read as a restart and is not appended again', () => {
    const stored = [frame('A', 0, 0), frame('A', 1, 1), frame('A', 2, 2, true)];
    const out: AlignOutput[] = [];
    const aligner = new ReplayAligner({
      storedTail: stored,
      hasHistory: true,
      bufferSize: 512,
      idZero: new IdZeroTracker(),
      emit: (o) => out.push(o),
    });
    aligner.hint(); // the quiet window passed: nothing arrived yet
    aligner.push(stored[1]!);
    aligner.push(stored[2]!);
    aligner.push(frame('B', 0, 0)); // live
    aligner.push(frame('B', 1, 1));
    expect(out).toEqual([
      { kind: 'frame', frame: frame('B', 0, 0) },
      { kind: 'frame', frame: frame('B', 1, 1) },
    ]);
  });
});
