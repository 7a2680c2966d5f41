/**
 * A reader that falls behind a 0.4+ capsule: the gateway's whole process stopped (SIGSTOP) while the
 * capsule writes a burst of large frames, so its connection's queue overflows and the capsule drops
 * frames from it, saying so in a `lagged` frame. The gateway must reconnect and replay what the
 * 512-frame buffer still holds; only what it no longer holds may be missing, flagged with the count
 * the ids prove; `lagged` itself never enters the log.
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
const CAPSULE = 'behind';

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

/** A gateway process on Redis in front of a fresh 0.4 capsule, watching it. */
const attach = async (): Promise<{ s: SimulatedCapsule; g: GatewayProcess; st: RedisStore }> => {
  redis = await startRedisServer();
  // A short per-connection queue, so a burst the buffer still holds in full overflows it.
  sim = await startSimulator({ release: '0.4', taskAcceptance: 'queue', connectionQueue: 32 });
  const watching = new Promise<void>((resolve) => sim!.on('watchers', (n: number) => n > 0 && resolve()));
  gw = gatewayProcess(await freePort(), ['--redis', redis.url, '--capsule', `${CAPSULE}=${sim.url}`], {
    REPLICA_ID: 'behind-1',
  });
  await gw.start();
  await watching;
  store = new RedisStore(redis.url, { commandTimeoutMs: 1000 });
  return { s: sim, g: gw, st: store };
};

/** The burst written while the gateway is stopped, then the gateway resumed and the log settled. */
const burstWhileStopped = async (
  s: SimulatedCapsule,
  g: GatewayProcess,
  st: RedisStore,
  chunks: number,
  chunkBytes: number,
): Promise<void> => {
  await s.submit('#sim {"chunks":4}').done;
  g.pause();
  const dropped = s.droppedToWatchers;
  await s.submit(`#sim ${JSON.stringify({ chunks, delayMs: 0, chunkBytes })}`).done;
  // The stopped reader really fell behind: the capsule dropped frames from its connection.
  expect(s.droppedToWatchers).toBeGreaterThan(dropped);
  g.resume();
  const last = s.submit('#sim {"chunks":3}');
  await last.done;
  expect(await waitForFinal(st, CAPSULE, last.taskId)).toBe(true);
};

describe.skipIf(!haveRedis)('a reader that falls behind a 0.4 capsule', () => {
  it(
    'within the buffer: reconnects on `lagged` and replays, nothing missing',
    { timeout: 60_000 },
    async () => {
      const { s, g, st } = await attach();
      // Under 512 frames in all: whatever the connection lost, the buffer still holds.
      await burstWhileStopped(s, g, st, 450, 16_384);
      const records = await readAll(st, CAPSULE);
      const cmp = compareLog(records, s.written);
      expect(cmp.problems).toEqual([]);
      expect(cmp.covered).toEqual([]);
      expect(cmp.matched).toBe(s.written.length);
      expect(records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing')).toEqual([]);
      expect(records.some((r) => r.kind === 'frame' && r.event === 'lagged')).toBe(false);
      // The `lagged` frame ended the connection: a reconnect, said in the log as the connection's end.
      expect(
        records.some((r) => r.kind === 'fact' && r.fact === 'upstream-lost' && r.reason === 'lagged'),
      ).toBe(true);
    },
  );

  it(
    'past the buffer: only what it no longer holds is missing, flagged with the exact count',
    { timeout: 60_000 },
    async () => {
      const { s, g, st } = await attach();
      await burstWhileStopped(s, g, st, 1500, 4096);
      const records = await readAll(st, CAPSULE);
      const cmp = compareLog(records, s.written);
      expect(cmp.problems).toEqual([]);
      expect(cmp.covered.length).toBeGreaterThan(0);
      const facts = records.flatMap((r) =>
        r.kind === 'fact' && r.fact === 'frames-possibly-missing'
          ? [{ reason: r.reason, count: r.count }]
          : [],
      );
      expect(facts.map((f) => f.reason)).toEqual(['lagged']);
      // The fact's count is the number of frames the log lacks, no more, no less.
      expect(facts[0]!.count).toBe(cmp.covered.length);
      expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
      // What the buffer held at the reconnect was replayed: at least its 512 newest frames before the end.
      expect(cmp.matched).toBeGreaterThanOrEqual(512);
      expect(records.some((r) => r.kind === 'frame' && r.event === 'lagged')).toBe(false);
    },
  );
});
