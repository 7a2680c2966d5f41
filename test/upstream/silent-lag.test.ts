/**
 * A reader that falls behind a capsule on the spec's line: the gateway's whole process stopped
 * (SIGSTOP) while the capsule writes large frames, so its connection's queue overflows and the capsule
 * drops a run from it without a trace (spec "Frames a connection misses"). The frame after the run is
 * the witness; the gateway must reconnect and replay what the 512-frame buffer holds, so the log
 * equals what the capsule wrote, but for id-0 frames the replay cannot carry, each under a fact.
 */
import { describe, expect, it } from 'vitest';
import type { SimulatedCapsule } from '../../src/simulator/index.js';
import { redisServerAvailable } from '../support/redis-server.js';
import { waitForFinal } from '../soak/soak-checks.js';
import { behindRig, writeWhileStopped } from './behind-rig.js';
import { compareLog, readAll } from './log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const attach = behindRig('behind-spec');
const large = (chunks: number) => ({ chunks, chunkBytes: 16_384 });

const losses = (records: Awaited<ReturnType<typeof readAll>>) =>
  records.flatMap((r) => (r.kind === 'fact' && r.fact === 'frames-possibly-missing' ? [r.reason] : []));

/** The log against what the capsule wrote: nothing missing but id-0 frames of the tasks the run hit. */
const expectReplayedInPlace = (
  records: Awaited<ReturnType<typeof readAll>>,
  s: SimulatedCapsule,
  tasks: number,
) => {
  const cmp = compareLog(records, s.written);
  expect(cmp.problems).toEqual([]);
  // A run that starts at a task's first status takes the one frame no replay from 0 carries.
  expect(
    cmp.covered.every((c) => c.frame.id === '0' && c.by.every((b) => b.startsWith('id-zero-unreplayable'))),
  ).toBe(true);
  expect(cmp.covered.length).toBeLessThanOrEqual(tasks);
  expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
  // First contact says the history before it is unknown; nothing else but id-0 is said missing.
  expect(losses(records).filter((r) => r !== 'id-zero-unreplayable')).toEqual(['cold-attach']);
  // The frame after the run ended the connection: the gateway reconnected to replay it in place.
  expect(
    records.some((r) => r.kind === 'fact' && r.fact === 'upstream-lost' && r.reason === 'frames skipped'),
  ).toBe(true);
};

describe.skipIf(!haveRedis)('a reader that falls behind a capsule on the spec line', () => {
  it('a run dropped inside one task: replayed in its place', { timeout: 60_000 }, async () => {
    const rig = await attach('spec');
    await writeWhileStopped(rig, [large(450)]);
    expectReplayedInPlace(await readAll(rig.st, rig.capsule), rig.s, 1);
  });

  it(
    'a gateway started again that reads its replay slowly: the run dropped behind the replay is replayed in place',
    { timeout: 60_000 },
    async () => {
      const rig = await attach('spec');
      const { s, g } = rig;
      const first = s.submit('#sim {"chunks":4}');
      await first.done;
      expect(await waitForFinal(rig.st, rig.capsule, first.taskId)).toBe(true);
      await g.kill();
      // Written while no gateway runs: the next connection's replay (5 MB) fills its socket.
      await s.submit(`#sim ${JSON.stringify({ ...large(300), delayMs: 0 })}`).done;
      const connected = new Promise<void>((resolve) => s.on('watchers', (n: number) => n > 0 && resolve()));
      await g.start();
      await connected;
      g.pause(); // the new process, not reading yet: live frames queue behind the replay
      const dropped = s.droppedToWatchers;
      await s.submit(`#sim ${JSON.stringify({ ...large(100), delayMs: 0 })}`).done;
      expect(s.droppedToWatchers).toBeGreaterThan(dropped);
      g.resume();
      const last = s.submit('#sim {"chunks":3}');
      await last.done;
      expect(await waitForFinal(rig.st, rig.capsule, last.taskId)).toBe(true);
      // Id-0 statuses no replay carries: the task written while no gateway ran, the one the run took,
      // and the last one if its first status came while the gateway reconnected to replay.
      expectReplayedInPlace(await readAll(rig.st, rig.capsule), s, 3);
    },
  );

  it('a run across two tasks: replayed in its place', { timeout: 60_000 }, async () => {
    const rig = await attach('spec');
    await writeWhileStopped(rig, [large(350), large(100)]);
    expectReplayedInPlace(await readAll(rig.st, rig.capsule), rig.s, 2);
  });
});
