/**
 * The ingestor against every release line of the simulator: the line is read off the agent card,
 * and under 20 connection cuts the log equals what the capsule wrote. On 0.4 and later (one id
 * sequence per session, resumed exactly by id) nothing at all is missing, not even flagged; a capsule
 * restart starts a new stretch of the log; an upgrade in place switches the line at the next connection.
 */
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/log/memory-store.js';
import {
  SIM_RELEASES,
  startSimulator,
  type SimulatedCapsule,
  type SimulatorOptions,
} from '../../src/simulator/index.js';
import { uniqueCapsule } from '../support/redis.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { cutWhileWriting, settle, startRig } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';

const SCRIPTS = [
  '#sim {"chunks":8,"thinking":3,"tools":2,"turns":2}',
  '#sim {"tools":1,"toolError":true,"turns":2}',
  '#sim {"reopen":true,"chunks":3}',
  '#sim {"input":{"prompt":"ok?","outcome":"answer","afterMs":2},"turns":2}',
  '#sim {"chunks":20}',
];

const workload = async (s: SimulatedCapsule, stop: () => boolean): Promise<void> => {
  for (let n = 0; n < 10_000 && !stop(); n++) await s.submit(SCRIPTS[n % SCRIPTS.length]!).done;
};

const missingFacts = (records: Awaited<ReturnType<typeof readAll>>) =>
  records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing');

/** A simulated capsule and an ingestor on a fresh store, connected. */
const attach = async (options: SimulatorOptions, name: string) => {
  const s = stopAfterTest(await startSimulator({ taskAcceptance: 'queue', ...options }));
  const store = new MemoryStore();
  const capsule = uniqueCapsule(name);
  const rig = stopAfterTest(startRig(s, store, capsule));
  await rig.connected();
  return { s, store, capsule, rig };
};

describe.each(SIM_RELEASES.map((release) => ({ release })))('release line $release', ({ release }) => {
  it('20 connection cuts during bursts: the log equals what the capsule wrote', async () => {
    const { s, store, capsule, rig } = await attach(
      { release, frameDelayMs: 1, heartbeatMs: 500 },
      `line-${release.replace('.', '')}`,
    );
    expect(rig.ingestor.state().connection).toMatchObject({ release, sessionId: s.sessionId });
    let done = false;
    const producer = workload(s, () => done);
    await cutWhileWriting(s, rig, 20);
    done = true;
    await producer;
    await settle(s, store, capsule, rig);
    const records = await readAll(store, capsule);
    const cmp = compareLog(records, s.written);
    expect(cmp.problems).toEqual([]);
    if (release === 'spec') {
      expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
    } else {
      // Resumed by id: every frame the capsule wrote is in the log, none flagged as possibly missing,
      // unless a reconnect came so late (a loaded machine) that the 512-frame buffer had moved past
      // it: then only a `gap` (or `lagged`) fact, with exactly the count the log lacks.
      const facts = missingFacts(records);
      expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
      expect(facts.filter((f) => f.kind === 'fact' && f.reason !== 'gap' && f.reason !== 'lagged')).toEqual(
        [],
      );
      const counted = facts.reduce((n, f) => n + (f.kind === 'fact' && 'count' in f ? (f.count ?? 0) : 0), 0);
      expect(counted).toBe(cmp.covered.length);
      if (facts.length === 0) expect(cmp.matched).toBe(s.written.length);
      // `lagged` is about the gateway's own connection: never a frame of the log.
      expect(records.some((r) => r.kind === 'frame' && r.event === 'lagged')).toBe(false);
    }
    const connected = records.filter((r) => r.kind === 'fact' && r.fact === 'upstream-connected');
    expect(
      connected.every((r) => r.kind === 'fact' && r.fact === 'upstream-connected' && r.release === release),
    ).toBe(true);
  });

  it('a capsule restart starts a new stretch of the log, also when the new session reaches the old cursor', async () => {
    const { s, store, capsule, rig } = await attach({ release }, `restart-${release.replace('.', '')}`);
    await s.submit(SCRIPTS[0]!).done;
    await settle(s, store, capsule, rig);
    const firstSession = s.sessionId;
    // Restarted while the gateway is cut off, and the new session writes past the old one's last id.
    await s.restart();
    for (let i = 0; i < 3; i++) await s.submit(SCRIPTS[4]!).done;
    await settle(s, store, capsule, rig);
    const records = await readAll(store, capsule);
    expect(compareLog(records, s.written).problems).toEqual([]);
    expect(records.filter((r) => r.kind === 'fact' && r.fact === 'capsule-session-started').length).toBe(1);
    expect(rig.ingestor.state().connection?.sessionId).toBe(s.sessionId);
    expect(s.sessionId).not.toBe(firstSession);
  });
});

describe('a capsule upgraded in place', () => {
  it('switches line at the next connection without losing or repeating a frame', async () => {
    const { s, store, capsule, rig } = await attach({ release: 'spec' }, 'upgrade');
    await s.submit(SCRIPTS[0]!).done;
    await settle(s, store, capsule, rig);
    await s.restart({ release: '0.4' });
    await s.submit(SCRIPTS[1]!).done;
    await settle(s, store, capsule, rig);
    await s.restart({ release: '0.6' });
    await s.submit(SCRIPTS[0]!).done;
    await settle(s, store, capsule, rig);
    const records = await readAll(store, capsule);
    expect(compareLog(records, s.written).problems).toEqual([]);
    const lines = records.flatMap((r) =>
      r.kind === 'fact' && r.fact === 'upstream-connected' ? [r.release] : [],
    );
    expect(lines[0]).toBe('spec');
    expect(lines.at(-1)).toBe('0.6');
    expect(lines).toContain('0.4');
    expect(records.some((r) => r.kind === 'frame' && r.event === 'tool-call-started')).toBe(true);
  });
});
