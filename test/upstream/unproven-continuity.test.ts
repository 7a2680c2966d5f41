/**
 * A spec-line replay that cannot prove it continues the log is flagged before anything it appends.
 *
 * The gateway stops with the log ending on a reopened task's first attempt (R1, ids 0..24, the log's
 * last id 24). Without it the capsule writes the second attempt R2 (ids 0..24 again, byte for byte:
 * a whole attempt whose ids are all ≤ the log's last id), a small task S, and a filler F, exactly 512
 * frames from R2's first: the buffer has evicted everything the log holds and starts at R2's id-0
 * status, so the replay from 0 opens with R2:1.. and no `gap` (spec "Replay"). By content R2 is
 * indistinguishable from R1, which the log ends with: the replay looks as if it continued the log.
 * Only the replay's length (the buffer evicted) says otherwise, and the network holds the replay
 * right after R2 for longer than the quiet window, so timing must not be what decides it.
 *
 * The log must say "frames possibly missing" before the first frame the gateway appends again, and
 * against what the capsule wrote nothing may be missing without such a fact.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/log/memory-store.js';
import { IdZeroTracker } from '../../src/upstream/id-zero.js';
import {
  ReplayAligner,
  type AlignFrame,
  type AlignOutput,
  type ReconnectOutput,
} from '../../src/upstream/replay-alignment.js';
import type { LogRecord } from '../../src/log/record.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { uniqueCapsule } from '../support/redis.js';
import { settle, startRig, waitForRecord, type Rig } from './harness.js';
import { compareLog, isFinalStatusOf, readAll } from './log-vs-written.js';
import { startStallProxy, type StallProxy } from './stall-proxy.js';

const BUFFER = 512;

let sim: SimulatedCapsule | undefined;
let proxy: StallProxy | undefined;
const rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs.splice(0)) await r.stop();
  await proxy?.close();
  await sim?.stop();
  sim = proxy = undefined;
});

/** A `{"chunks":c}` task writes c + 3 frames: its working status, c chunks, the end of the turn, completed. */
const chunksFor = (frames: number): number => frames - 3;

const run = async (withTaskBefore: boolean) => {
  sim = await startSimulator({ taskAcceptance: 'queue', heartbeatMs: 120_000 });
  const s = sim;
  proxy = await startStallProxy(s.url);
  const store = new MemoryStore();
  const capsule = uniqueCapsule('unproven');

  // The first gateway: stopped the moment it has appended R1's final status, nothing of R2.
  let reopened: string | null = null;
  let stopped: Promise<void> | null = null;
  const first = startRig(s, store, capsule, {
    url: proxy.url,
    ingestor: {
      onFrame: (f) => {
        if (stopped === null && reopened !== null && f.event === 'status' && f.data.includes(reopened)) {
          if (f.data.includes('"final":true')) stopped = first.stop();
        }
      },
    },
  });
  await first.connected();
  if (withTaskBefore) {
    const p = s.submit('#sim {"chunks":3}');
    await p.done;
    await waitForRecord(store, capsule, (r) => isFinalStatusOf(r, p.taskId));
  }
  const r = s.submit('#sim {"chunks":20,"reopen":true}');
  reopened = r.taskId;
  await r.done;
  expect(stopped).not.toBeNull();
  await stopped;
  const logged = await readAll(store, capsule);
  const lastFrame = logged.filter((x) => x.kind === 'frame').at(-1);
  expect(lastFrame && isFinalStatusOf(lastFrame, r.taskId)).toBe(true);

  // Written while no gateway runs: R2 (already), S, then F up to exactly BUFFER frames from R2:0.
  const r1Final = s.written.findIndex(
    (w) => w.event === 'status' && w.data.includes(r.taskId) && w.data.includes('"final":true'),
  );
  const r2Start = r1Final + 1;
  expect(s.written[r2Start]).toMatchObject({ id: '0', event: 'status' });
  const lastId = Number(s.written[r1Final]!.id);
  const small = s.submit('#sim {"chunks":2}');
  await small.done;
  const smallIds = s.written.filter((w) => w.data.includes(small.taskId)).map((w) => Number(w.id));
  expect(Math.max(...smallIds)).toBeLessThanOrEqual(lastId);
  await s.submit(`#sim ${JSON.stringify({ chunks: chunksFor(BUFFER - (s.written.length - r2Start)) })}`).done;
  expect(s.written.length - r2Start).toBe(BUFFER); // the buffer starts at R2's id-0 status: no gap

  // The gateway starts again; the network holds its replay right after R2 for a while.
  const released = proxy.stallNextAt(small.taskId, 600);
  const second = startRig(s, store, capsule, { url: proxy.url });
  rigs.push(second);
  await second.connected();
  await released;
  await settle(s, store, capsule, second);
  return { s, records: await readAll(store, capsule), loggedBefore: logged.length };
};

/** The records the second gateway appended, from its `upstream-connected` fact on. */
const resumed = (records: LogRecord[], from: number): LogRecord[] => records.slice(from);

describe('a replay that cannot prove it continues the log (spec line)', () => {
  for (const withTaskBefore of [true, false]) {
    const what = withTaskBefore
      ? 'a task before the reopened one: its frames are gone from the buffer'
      : 'the reopened task is the session’s first: only the replay’s length tells';
    it(`gateway down while the capsule writes a buffer's worth, R2 ≡ R1 at the buffer's start (${what})`, async () => {
      const { s, records, loggedBefore } = await run(withTaskBefore);
      const after = resumed(records, loggedBefore);
      expect(after[0]).toMatchObject({ kind: 'fact', fact: 'upstream-connected' });
      // A fact that frames may be missing comes before the first frame appended again.
      const firstFrame = after.findIndex((x) => x.kind === 'frame');
      const facts = after
        .slice(0, firstFrame)
        .flatMap((x) => (x.kind === 'fact' && x.fact === 'frames-possibly-missing' ? [x.reason] : []));
      expect(facts).toContain('no-overlap');
      // Against what the capsule wrote: nothing missing without a fact, nothing twice.
      const cmp = compareLog(records, s.written);
      expect(cmp.problems).toEqual([]);
      expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
    });
  }
});

describe('the aligner waits for proof, not for a timer', () => {
  const frame = (task: string, id: number, final = false): AlignFrame => ({
    event: id === 0 || final ? 'status' : 'text',
    upstreamId: String(id),
    data: final
      ? `{"id":"${task}","status":{"state":"completed"},"final":true}`
      : `{"id":"${task}","text":"${id}","final":false}`,
  });
  // A young session's first task, cut after T:0..3 were stored; the replay is T:1..3, then live T:4.
  const stored = [0, 1, 2, 3].map((id) => frame('T', id));
  const aligner = (out: (AlignOutput | ReconnectOutput)[]): ReplayAligner => {
    const idZero = new IdZeroTracker();
    for (const f of stored) idZero.note(f);
    return new ReplayAligner({
      storedTail: stored,
      hasHistory: true,
      bufferSize: 512,
      idZero,
      emit: (o) => out.push(o),
    });
  };
  const facts = (out: (AlignOutput | ReconnectOutput)[]) => out.filter((o) => o.kind !== 'frame');

  it('the quiet window alone releases nothing when only the replay’s end can prove continuity', () => {
    const out: (AlignOutput | ReconnectOutput)[] = [];
    const a = aligner(out);
    for (const f of stored.slice(1)) a.push(f);
    a.hint(); // quiet: a stall mid-replay looks the same
    a.push(frame('T', 4, true));
    expect(out).toEqual([]);
    // A frame no replay holds (the next task's id-0 status) proves the end: the replay was short.
    a.push(frame('U', 0));
    expect(facts(out)).toEqual([]);
    expect(out.map((o) => (o.kind === 'frame' ? o.frame : null))).toEqual([
      frame('T', 4, true),
      frame('U', 0),
    ]);
  });

  it('no proof within the caller’s window: a fact first, then the frames', () => {
    const out: (AlignOutput | ReconnectOutput)[] = [];
    const a = aligner(out);
    for (const f of stored.slice(1)) a.push(f);
    a.hint();
    a.push(frame('T', 4));
    a.expire();
    expect(out).toEqual([
      { kind: 'missing', fact: { reason: 'no-overlap' } },
      { kind: 'frame', frame: frame('T', 4) },
    ]);
  });

  it('a replay longer than the buffer could hold unevicted: a fact at once, without waiting', () => {
    const out: (AlignOutput | ReconnectOutput)[] = [];
    const idZero = new IdZeroTracker();
    for (const f of stored) idZero.note(f);
    const a = new ReplayAligner({
      storedTail: stored,
      hasHistory: true,
      bufferSize: 8,
      idZero,
      emit: (o) => out.push(o),
    });
    for (const f of stored.slice(1)) a.push(f);
    for (let id = 4; id < 10; id++) a.push(frame('T', id));
    expect(out[0]).toEqual({ kind: 'missing', fact: { reason: 'no-overlap' } });
    expect(out.filter((o) => o.kind === 'frame')).toHaveLength(6);
  });
});

/**
 * The same as a property: a session with reopened attempts (each repeating the previous byte for
 * byte), a log holding a prefix of it, a buffer of a few frames that evicts (the `gap` branch as the
 * spec writes it), and the timing hint and the caller's window landing anywhere. Whatever the timing,
 * nothing the capsule wrote is missing from the log without a fact before the next frame appended.
 */
describe('whatever the timing, a replay never hides a loss', () => {
  const frame = (task: string, id: number, final = false): AlignFrame => ({
    event: id === 0 || final ? 'status' : 'text',
    upstreamId: String(id),
    data: final
      ? `{"id":"${task}","status":{"state":"completed"},"final":true}`
      : `{"id":"${task}","text":"${id}","final":false}`,
  });
  const historyArb = fc
    .array(fc.record({ frames: fc.integer({ min: 1, max: 6 }), reopen: fc.boolean() }), {
      minLength: 1,
      maxLength: 8,
    })
    .map((tasks) =>
      tasks.flatMap((t, i) => {
        const attempt = [frame(`T${i}`, 0)];
        for (let id = 1; id < t.frames; id++) attempt.push(frame(`T${i}`, id));
        attempt.push(frame(`T${i}`, t.frames, true));
        return t.reopen ? [...attempt, ...attempt] : attempt;
      }),
    );
  const caseArb = historyArb.chain((history) =>
    fc.record({
      history: fc.constant(history),
      stored: fc.integer({ min: 1, max: history.length }),
      away: fc.integer({ min: 0, max: history.length }),
      buffer: fc.integer({ min: 2, max: 24 }),
      hints: fc.array(fc.integer({ min: 0, max: history.length }), { maxLength: 2 }),
      expireAt: fc.option(fc.integer({ min: 0, max: history.length })),
    }),
  );

  it('every written frame is in the log or under a fact', () => {
    fc.assert(
      fc.property(caseArb, ({ history: session, stored: s, away, buffer, hints, expireAt }) => {
        // A last task nobody repeats, written live: it pins which attempt the log's frames are.
        const history = [...session, frame('Z', 0), frame('Z', 1), frame('Z', 2, true)];
        const reconnect = Math.min(session.length, s + away);
        const held = history.slice(Math.max(0, reconnect - buffer), reconnect);
        // Spec "Replay" from 0: the whole buffer after a gap when its oldest id is above 1, else id > 0.
        const gap = held.length > 0 && Number(held[0]!.upstreamId) > 1;
        const replay = gap ? held : held.filter((f) => f.upstreamId !== '0');
        const stream = [...replay, ...history.slice(reconnect)];
        const stored = history.slice(0, s);
        const out: (AlignOutput | ReconnectOutput)[] = [];
        const idZero = new IdZeroTracker();
        for (const f of stored) idZero.note(f);
        const aligner = new ReplayAligner({
          storedTail: stored,
          hasHistory: true,
          bufferSize: buffer,
          idZero,
          emit: (o) => out.push(o),
        });
        if (gap) aligner.gap({ firstAvailableId: held[0]!.upstreamId! });
        for (let i = 0; i <= stream.length; i++) {
          if (hints.includes(i)) aligner.hint();
          if (expireAt === i) aligner.expire();
          if (i < stream.length) aligner.push(stream[i]!);
        }
        aligner.comment();
        aligner.close();
        // A reconnect asks the next connection to finish the job: nothing to judge here.
        fc.pre(!out.some((o) => o.kind === 'reconnect'));
        let offset = 0;
        const record = (f: AlignFrame): LogRecord => ({
          kind: 'frame',
          event: f.event,
          upstreamId: f.upstreamId,
          data: f.data,
          receivedAt: 0,
          offset: ++offset,
        });
        const records: LogRecord[] = [
          ...stored.map(record),
          ...out.map((o): LogRecord => {
            if (o.kind === 'frame') return record(o.frame);
            if (o.kind === 'missing')
              return {
                kind: 'fact',
                fact: 'frames-possibly-missing',
                reason: o.fact.reason,
                receivedAt: 0,
                offset: ++offset,
              };
            return {
              kind: 'fact',
              fact: 'capsule-session-started',
              reason: 'new',
              receivedAt: 0,
              offset: ++offset,
            };
          }),
        ];
        const written = history.map((f) => ({ session: 1, event: f.event, id: f.upstreamId, data: f.data }));
        expect(compareLog(records, written).problems).toEqual([]);
      }),
      { numRuns: 3000 },
    );
  });
});
