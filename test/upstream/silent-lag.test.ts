/**
 * A reader that falls behind a capsule on the spec's line: the gateway's whole process stopped
 * (SIGSTOP) while the capsule writes large frames, so its connection's queue overflows and the capsule
 * drops a run from it without a trace (spec "Frames a connection misses"). The frame after the run is
 * the witness; the gateway must reconnect and replay what the 512-frame buffer holds, so the log
 * equals what the capsule wrote, but for id-0 frames the replay cannot carry, each under a fact.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import {
  freePort,
  redisServerAvailable,
  startRedisServer,
  type RedisServer,
} from '../support/redis-server.js';
import { gatewayProcess, type GatewayProcess } from '../soak/gateway-process.js';
import { waitForFinal } from '../soak/soak-checks.js';
import { compareLog, readAll } from './log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const CAPSULE = 'behind-spec';

let redis: RedisServer | undefined;
let sim: SimulatedCapsule | undefined;
let gw: GatewayProcess | undefined;
let store: RedisStore | undefined;
afterEach(async () => {
  await gw?.kill();
  await store?.close();
  await sim?.stop();
  await redis?.stop();
  gw = sim = store = redis = undefined;
});

const attach = async (): Promise<{ s: SimulatedCapsule; g: GatewayProcess; st: RedisStore }> => {
  redis = await startRedisServer();
  sim = await startSimulator({ taskAcceptance: 'queue', connectionQueue: 32 });
  const watching = new Promise<void>((resolve) => sim!.on('watchers', (n: number) => n > 0 && resolve()));
  gw = gatewayProcess(await freePort(), ['--redis', redis.url, '--capsule', `${CAPSULE}=${sim.url}`], {
    REPLICA_ID: 'behind-spec-1',
  });
  await gw.start();
  await watching;
  store = new RedisStore(redis.url, { commandTimeoutMs: 1000 });
  return { s: sim, g: gw, st: store };
};

/** `tasks` (chunk counts) written back to back while the gateway is stopped; then the log settled. */
const writeWhileStopped = async (
  s: SimulatedCapsule,
  g: GatewayProcess,
  st: RedisStore,
  tasks: number[],
): Promise<void> => {
  await s.submit('#sim {"chunks":4}').done;
  g.pause();
  const dropped = s.droppedToWatchers;
  const handles = tasks.map((chunks) =>
    s.submit(`#sim ${JSON.stringify({ chunks, delayMs: 0, chunkBytes: 16_384 })}`),
  );
  for (const h of handles) await h.done;
  // The stopped reader really fell behind: the capsule dropped a run from its connection, silently.
  expect(s.droppedToWatchers).toBeGreaterThan(dropped);
  g.resume();
  const last = s.submit('#sim {"chunks":3}');
  await last.done;
  expect(await waitForFinal(st, CAPSULE, last.taskId)).toBe(true);
};

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
    const { s, g, st } = await attach();
    await writeWhileStopped(s, g, st, [450]);
    expectReplayedInPlace(await readAll(st, CAPSULE), s, 1);
  });

  it('a run across two tasks: replayed in its place', { timeout: 60_000 }, async () => {
    const { s, g, st } = await attach();
    await writeWhileStopped(s, g, st, [350, 100]);
    expectReplayedInPlace(await readAll(st, CAPSULE), s, 2);
  });
});
