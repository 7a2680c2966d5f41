import { describe, expect, it } from 'vitest';
import { LogWriter } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { LogStore } from '../../src/log/store.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { CapsuleIngestor } from '../../src/upstream/ingestor.js';
import { cutWhileWriting, settle, startRig, waitForRecord } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';

const SCRIPTS = [
  'hello world',
  '#sim {"chunks":8,"thinking":3,"tools":2,"turns":2}',
  '#sim {"tools":1,"toolError":true,"turns":2}',
  '#sim {"fail":"boom"}',
  '#sim {"input":{"prompt":"ok?","outcome":"answer","afterMs":2},"turns":2}',
  '#sim {"input":{"prompt":"ok?","outcome":"timeout","afterMs":2},"turns":2}',
  '#sim {"reopen":true,"chunks":3}',
  '#sim {"reply":"the whole reply"}',
  '#sim {"chunks":20,"delayMs":0}',
  '#sim {"tools":3,"chunks":2,"thinking":2,"turns":3}',
  '#sim {"reopen":true,"reply":"r"}',
  '#sim {"input":{"prompt":"p","outcome":"timeout","afterMs":1},"tools":2,"turns":3}',
];

/** Submit `count` tasks one after another, cycling through SCRIPTS. */
const workload = async (s: SimulatedCapsule, count: number, stop?: () => boolean): Promise<void> => {
  for (let n = 0; n < count && !stop?.(); n++) await s.submit(SCRIPTS[n % SCRIPTS.length]!).done;
};

const facts = async (store: LogStore, capsule: string, fact: string): Promise<number> =>
  (await readAll(store, capsule)).filter((r) => r.kind === 'fact' && r.fact === fact).length;

describe('CapsuleIngestor against the simulator', () => {
  it('a long varied workload without faults: the log equals what the capsule wrote', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 0 }));
    const store = new MemoryStore();
    const capsule = uniqueCapsule('ing');
    const rig = stopAfterTest(startRig(sim, store, capsule));
    await rig.connected();
    await workload(sim, 60);
    await settle(sim, store, capsule, rig);
    const records = await readAll(store, capsule);
    const cmp = compareLog(records, sim.written);
    expect(cmp.problems).toEqual([]);
    expect(cmp.covered).toEqual([]);
    expect(cmp.matched).toBe(sim.written.length);
    const missing = records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing');
    expect(missing.map((r) => (r as { reason: string }).reason)).toEqual(['cold-attach']);
  });

  it('20+ connection cuts during bursts: identical except unreplayable frames, each covered', async () => {
    const sim = stopAfterTest(
      await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 1, heartbeatMs: 500 }),
    );
    const s = sim;
    const store = new MemoryStore();
    const capsule = uniqueCapsule('cut');
    const rig = stopAfterTest(startRig(s, store, capsule));
    await rig.connected();
    let done = false;
    const producer = workload(s, 10_000, () => done);
    const cuts = 24;
    await cutWhileWriting(s, rig, cuts);
    done = true;
    await producer;
    await settle(s, store, capsule, rig);
    const cmp = compareLog(await readAll(store, capsule), s.written);
    expect(cmp.problems).toEqual([]);
    expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
    expect(rig.ingestor.state().reconnects).toBeGreaterThanOrEqual(cuts);
  });

  it('a reopened task repeating its frames byte for byte is kept, also across a cut', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
    const store = new MemoryStore();
    const capsule = uniqueCapsule('reo');
    const rig = stopAfterTest(startRig(sim, store, capsule));
    await rig.connected();
    await sim.submit('#sim {"reopen":true,"chunks":4}').done;
    // Second reopen task: cut after its first attempt completed, before the second attempt is read.
    const h = sim.submit('#sim {"reopen":true,"chunks":4,"delayMs":15}');
    const firstCompleted = new Promise<void>((resolve) => {
      const on = (w: { data: string }): void => {
        if (w.data.includes(h.taskId) && w.data.includes('"completed"')) {
          sim.off('written', on);
          sim.cutConnections();
          resolve();
        }
      };
      sim.on('written', on);
    });
    await firstCompleted;
    await h.done;
    await settle(sim, store, capsule, rig);
    const records = await readAll(store, capsule);
    const cmp = compareLog(records, sim.written);
    expect(cmp.problems).toEqual([]);
    // Only the second attempt's id-0 `working` can be missing (a replay from 0 skips it).
    expect(cmp.covered.every((c) => c.frame.id === '0')).toBe(true);
    const reopened = sim.written.filter((w) => w.data.includes(h.taskId) && w.id !== '0');
    const logged = records.filter(
      (r) => r.kind === 'frame' && r.data.includes(h.taskId) && r.upstreamId !== '0',
    );
    expect(logged.length).toBe(reopened.length);
    expect(new Set(reopened.map((w) => w.data)).size).toBeLessThan(reopened.length); // repeats exist
  });

  it('a capsule restart is recorded as a new session', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
    const store = new MemoryStore();
    const capsule = uniqueCapsule('rst');
    const rig = stopAfterTest(startRig(sim, store, capsule));
    await rig.connected();
    await workload(sim, 3);
    await settle(sim, store, capsule, rig);
    await sim.restart();
    // The restart shows by content: the new session's first frames continue nothing we stored
    // (an idle restarted capsule shows at its first heartbeat).
    await workload(sim, 3);
    await waitForRecord(store, capsule, (r) => r.kind === 'fact' && r.fact === 'capsule-session-started');
    await settle(sim, store, capsule, rig);
    const records = await readAll(store, capsule);
    expect(compareLog(records, sim.written).problems).toEqual([]);
    expect(await facts(store, capsule, 'capsule-session-started')).toBe(1);
    const reasons = records.flatMap((r) =>
      r.kind === 'fact' && r.fact === 'frames-possibly-missing' ? [r.reason] : [],
    );
    expect(reasons).toContain('capsule-restarted');
  });

  it('capsule-closed is recorded and the ingestor reconnects', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
    const store = new MemoryStore();
    const capsule = uniqueCapsule('cls');
    const rig = stopAfterTest(startRig(sim, store, capsule));
    await rig.connected();
    sim.closeStream();
    await waitForRecord(store, capsule, (r) => r.kind === 'fact' && r.fact === 'capsule-closed');
    await waitForRecord(
      store,
      capsule,
      (r) => r.kind === 'fact' && r.fact === 'upstream-connected' && r.attempt === 2,
    );
    await workload(sim, 2);
    await settle(sim, store, capsule, rig);
    expect(compareLog(await readAll(store, capsule), sim.written).problems).toEqual([]);
  });

  it('a capsule known fresh: an empty first replay is no cold-attach; one that already worked still is', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 0 }));
    const store = new MemoryStore();
    const [fresh, worked] = [uniqueCapsule('fresh'), uniqueCapsule('worked')];
    const freshCapsules = new Set([fresh, worked]);
    const rig = stopAfterTest(startRig(sim, store, fresh, { ingestor: { freshCapsules } }));
    await rig.connected();
    await workload(sim, 3);
    await settle(sim, store, fresh, rig);
    const records = await readAll(store, fresh);
    expect(compareLog(records, sim.written).problems).toEqual([]);
    expect(await facts(store, fresh, 'frames-possibly-missing')).toBe(0);
    // Called fresh, but the capsule has tasks behind it (their id-0 frames are never replayed): the
    // replay is not empty, so the log still says what it cannot vouch for.
    const late = stopAfterTest(startRig(sim, store, worked, { ingestor: { freshCapsules } }));
    await late.connected();
    await workload(sim, 1);
    await settle(sim, store, worked, late);
    const reasons = (await readAll(store, worked)).flatMap((r) =>
      r.kind === 'fact' && r.fact === 'frames-possibly-missing' ? [r.reason] : [],
    );
    expect(reasons[0]).toBe('cold-attach');
  });

  it('a second ingestor on the same store (gateway restart) does not duplicate the replayed buffer', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
    const store = new MemoryStore();
    const capsule = uniqueCapsule('gw');
    const first = startRig(sim, store, capsule);
    await first.connected();
    await workload(sim, 12);
    await settle(sim, store, capsule, first);
    await first.stop();
    const second = stopAfterTest(startRig(sim, store, capsule));
    await second.connected();
    await workload(sim, 4);
    await settle(sim, store, capsule, second);
    const records = await readAll(store, capsule);
    const cmp = compareLog(records, sim.written);
    expect(cmp.problems).toEqual([]);
    expect(cmp.covered).toEqual([]);
    expect(await facts(store, capsule, 'capsule-session-started')).toBe(0);
    const reasons = records.flatMap((r) =>
      r.kind === 'fact' && r.fact === 'frames-possibly-missing' ? [r.reason] : [],
    );
    expect(reasons).toEqual(['cold-attach']);
  });

  it.skipIf(!testRedisUrl())(
    'on Redis: a gateway restart neither duplicates the buffer nor loses frames',
    async () => {
      const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
      const capsule = uniqueCapsule('rgw');
      const storeA = new RedisStore(testRedisUrl()!);
      const first = startRig(sim, storeA, capsule);
      await first.connected();
      await workload(sim, 12);
      await settle(sim, storeA, capsule, first);
      await first.stop();
      await storeA.close();
      sim.submit('#sim {"chunks":5}'); // written while no gateway runs: recovered from the replay
      await sim.idle();
      // A new process on the same Redis.
      const storeB = stopAfterTest(new RedisStore(testRedisUrl()!));
      const second = stopAfterTest(startRig(sim, storeB, capsule));
      await second.connected();
      await workload(sim, 3);
      await settle(sim, storeB, capsule, second);
      const records = await readAll(storeB, capsule);
      const cmp = compareLog(records, sim.written);
      expect(cmp.problems).toEqual([]);
      // Only the task that ran while no gateway was up lost its id-0 frame (a replay from 0 skips it).
      expect(cmp.covered.map((c) => c.frame.id)).toEqual(['0']);
      expect(await facts(storeB, capsule, 'capsule-session-started')).toBe(0);
    },
  );

  it('door token: refused without it (no log record), connected with it; the token is never in the log', async () => {
    const sim = stopAfterTest(await startSimulator({ doorToken: 'door-sekret' }));
    const store = new MemoryStore();
    const capsule = uniqueCapsule('tok');
    const writer = new LogWriter(store);
    const states: string[] = [];
    const reasons: (string | null)[] = [];
    const refused = new CapsuleIngestor({
      capsule,
      url: sim.url,
      writer,
      store,
      backoffBaseMs: 10,
      backoffCapMs: 20,
      onState: (st) => {
        states.push(st.state);
        reasons.push(st.reason);
      },
    });
    refused.start();
    await waitForCondition(() => states.filter((x) => x === 'backoff').length >= 2);
    await refused.stop();
    expect(reasons).toContain('unauthorized');
    expect(await readAll(store, capsule)).toEqual([]);
    const rig = stopAfterTest(startRig(sim, store, capsule, 'door-sekret'));
    await rig.connected();
    await settle(sim, store, capsule, rig);
    const records = await readAll(store, capsule);
    expect(compareLog(records, sim.written).problems).toEqual([]);
    expect(JSON.stringify(records)).not.toContain('door-sekret');
  });
});

/** Bounded poll for a condition driven by callbacks already collected (paced, not timed). */
const waitForCondition = async (cond: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(cond()).toBe(true);
};
