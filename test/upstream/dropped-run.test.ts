/**
 * A capsule on the spec's line drops the oldest frames of a connection's live queue past 128 without
 * a trace (spec "Frames a connection misses"), most often right behind a replay that filled the
 * socket. The frame after such a run is the only witness: a task whose id jumps ahead of its run, or a
 * task first seen past its start. The aligner then asks for a replay (the buffer still holds the run)
 * instead of appending that frame after a hole; a skip the next replay shows again is the capsule's
 * own and is taken as is; a run that ends on a task's first status is said in place. A replay that
 * starts past what we hold may begin inside a task, so there only live frames are checked.
 */
import { describe, expect, it } from 'vitest';
import { IdZeroTracker } from '../../src/upstream/id-zero.js';
import {
  ReplayAligner,
  type AlignFrame,
  type AlignOutput,
  type ReconnectOutput,
} from '../../src/upstream/replay-alignment.js';

type Out = AlignOutput | ReconnectOutput;

const status = (task: string, id: number, final = false): AlignFrame => ({
  event: 'status',
  upstreamId: String(id),
  data: `{"id":"${task}","status":{"state":"${final ? 'completed' : 'working'}"},"final":${final}}`,
});
const text = (task: string, id: number): AlignFrame => ({
  event: 'text',
  upstreamId: String(id),
  data: `{"id":"${task}","text":"chunk ${id}","final":false}`,
});
/** A task's frames: its id-0 status, chunks 1..n-1, its final status at n. */
const task = (name: string, n: number): AlignFrame[] => [
  status(name, 0),
  ...Array.from({ length: n - 1 }, (_, i) => text(name, i + 1)),
  status(name, n, true),
];

const aligner = (stored: AlignFrame[], out: Out[], acceptSkip: AlignFrame | null = null): ReplayAligner => {
  const idZero = new IdZeroTracker();
  for (const f of stored) idZero.note(f);
  return new ReplayAligner({
    storedTail: stored,
    hasHistory: true,
    bufferSize: 512,
    idZero,
    acceptSkip,
    emit: (o) => out.push(o),
  });
};
const replayOf = (frames: AlignFrame[]): AlignFrame[] => frames.filter((f) => f.upstreamId !== '0');
const framesOf = (out: Out[]): AlignFrame[] => out.flatMap((o) => (o.kind === 'frame' ? [o.frame] : []));

/**
 * A connection that has been up a while (its replay over: a heartbeat came) reading the live tail of
 * A's burst, then the capsule drops a run and the next frame it delivers is `after`.
 */
const liveThenDrop = (history: AlignFrame[], storedUpTo: number, resumeAt: number) => {
  const stored = history.slice(0, storedUpTo);
  const out: Out[] = [];
  const a = aligner(stored, out);
  for (const f of replayOf(stored)) a.push(f);
  a.comment();
  for (const f of history.slice(resumeAt)) a.push(f);
  a.close();
  return { stored, out };
};

describe('a run dropped from a live connection (spec line)', () => {
  const history = [...task('A', 60), ...task('B', 40), ...task('C', 5)];

  it('a jump inside a task: reconnect at the frame after the run, nothing from it on released', () => {
    // Stored A:0..20, delivered live: A:21..24, then A:40.. (A:25..39 dropped).
    const h = history.slice(0, 25);
    const { out } = liveThenDrop([...h, ...history.slice(40)], 21, 21);
    const at = out.findIndex((o) => o.kind === 'reconnect');
    expect(out[at]).toEqual({ kind: 'reconnect', reason: 'frames skipped', frame: history[40] });
    expect(framesOf(out)).toEqual(history.slice(21, 25));
    expect(out.slice(at + 1)).toEqual([]);
  });

  it('a task first seen past its second frame (the run took the previous end and its start): reconnect', () => {
    // A:0..50 stored and delivered; A:51..60 and B:0..9 dropped; B:10 is next.
    const { out } = liveThenDrop([...history.slice(0, 51), ...history.slice(71)], 51, 51);
    expect(out).toEqual([{ kind: 'reconnect', reason: 'frames skipped', frame: history[71] }]);
  });

  it("the next connection's replay puts the run in its place: only B's id-0 status is missing, said so", () => {
    const stored = history.slice(0, 51);
    const out: Out[] = [];
    const a = aligner(stored, out, history[71]!);
    for (const f of replayOf(history.slice(0, 90))) a.push(f);
    a.comment(); // a heartbeat: never in a replay, so the replay is over
    a.close();
    const facts = out.flatMap((o) => (o.kind === 'missing' ? [o.fact.reason] : []));
    expect(facts).toEqual(['id-zero-unreplayable']);
    expect(out.some((o) => o.kind === 'reconnect')).toBe(false);
    const bStart = history.findIndex((f) => f.data.includes('"id":"B"'));
    expect(framesOf(out)).toEqual([...history.slice(51, bStart), ...history.slice(bStart + 1, 90)]);
  });

  it('a skip the buffer holds too (the capsule wrote it so) is taken as is on the next connection', () => {
    const odd = [...task('A', 10).slice(0, 5), text('A', 9), status('A', 10, true)];
    const stored = odd.slice(0, 5);
    const first: Out[] = [];
    const a = aligner(stored, first);
    for (const f of replayOf(stored)) a.push(f);
    a.comment();
    a.push(odd[5]!);
    expect(first).toEqual([{ kind: 'reconnect', reason: 'frames skipped', frame: odd[5] }]);

    // The replay comes slowly: the quiet window passes inside it, so its skip reads as live too.
    const replayHinted = (acceptSkip: AlignFrame | null): Out[] => {
      const out: Out[] = [];
      const b = aligner(stored, out, acceptSkip);
      for (const f of replayOf(odd).slice(0, 4)) b.push(f);
      b.hint();
      for (const f of replayOf(odd).slice(4)) b.push(f);
      b.comment();
      b.close();
      return out;
    };
    expect(replayHinted(null)).toEqual([{ kind: 'reconnect', reason: 'frames skipped', frame: odd[5] }]);
    const second = replayHinted(odd[5]!);
    expect(second.some((o) => o.kind === 'reconnect')).toBe(false);
    expect(framesOf(second)).toEqual(odd.slice(5));
  });

  it("a run that ends on a task's first status: a lagged fact in place, before that status", () => {
    // A:0..40 delivered, A:41..60 (its final among them) dropped, B:0 next.
    const bStart = 61;
    const { out } = liveThenDrop([...history.slice(0, 41), ...history.slice(bStart, bStart + 3)], 41, 41);
    expect(out).toEqual([
      { kind: 'missing', fact: { reason: 'lagged' } },
      ...history.slice(bStart, bStart + 3).map((frame) => ({ kind: 'frame', frame })),
    ]);
  });

  it('a new task after the previous one ended, or a rejected status while one runs: no fact, no reconnect', () => {
    const rejected: AlignFrame = {
      event: 'status',
      upstreamId: '0',
      data: '{"id":"R","status":{"state":"rejected","message":"task rejected: capsule is busy"},"final":true}',
    };
    const live = [...history.slice(10, 20), rejected, ...history.slice(20, 70)];
    const { out } = liveThenDrop([...history.slice(0, 10), ...live], 10, 10);
    expect(out.every((o) => o.kind === 'frame')).toBe(true);
    expect(framesOf(out)).toEqual(live);
  });

  it('a run dropped right behind the replay (the socket still full of it), no heartbeat between: reconnect', () => {
    // Stored A:0..20; the replay brings A:21..30; A:31..50 were dropped behind it; A:51 comes next.
    const out: Out[] = [];
    const a = aligner(history.slice(0, 21), out);
    for (const f of replayOf(history.slice(0, 31))) a.push(f);
    a.push(history[51]!);
    a.close();
    expect(framesOf(out)).toEqual(history.slice(21, 31));
    expect(out.at(-1)).toEqual({ kind: 'reconnect', reason: 'frames skipped', frame: history[51] });
  });

  it("a run behind the replay that ends at the next task's second frame: reconnect (the first one ended unseen)", () => {
    const bStart = 61;
    const out: Out[] = [];
    const a = aligner(history.slice(0, 21), out);
    for (const f of replayOf(history.slice(0, 31))) a.push(f);
    a.push(history[bStart + 1]!); // B:1, A:31..60 and B:0 dropped
    a.close();
    expect(out.at(-1)).toEqual({ kind: 'reconnect', reason: 'frames skipped', frame: history[bStart + 1] });
  });

  it('nothing of the session stored yet (a gateway killed before its first frames were durable), a run dropped behind the whole replay: reconnect', () => {
    const out: Out[] = [];
    const idZero = new IdZeroTracker();
    const a = new ReplayAligner({
      storedTail: [],
      hasHistory: true, // the killed process's connection fact is all the log holds
      bufferSize: 512,
      idZero,
      emit: (o) => out.push(o),
    });
    for (const f of replayOf(history.slice(0, 61))) a.push(f); // A, whole
    a.push(history[61 + 20]!); // B:20: B:0..19 dropped behind the replay
    a.close();
    expect(framesOf(out)).toEqual(replayOf(history.slice(0, 61)));
    expect(out.at(-1)).toEqual({ kind: 'reconnect', reason: 'frames skipped', frame: history[81] });
  });

  it('a replay that starts past what we hold (a gap: evicted) may begin inside a task: no reconnect', () => {
    const out: Out[] = [];
    const a = aligner(task('X', 3), out);
    a.gap({ firstAvailableId: '30' });
    for (const f of history.slice(30, 45)) a.push(f);
    a.comment();
    a.close();
    expect(out.some((o) => o.kind === 'reconnect')).toBe(false);
    expect(out[0]).toEqual({ kind: 'missing', fact: { reason: 'gap', firstAvailableId: '30' } });
    expect(framesOf(out)).toEqual(history.slice(30, 45));
  });
});
