/**
 * The rig of the falling-behind tests: a gateway process on Redis in front of one simulated capsule
 * with a short per-connection queue, and the gateway SIGSTOPped while the capsule writes large
 * frames, so the queue overflows and the capsule drops frames from that connection.
 */
import { afterEach, expect } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { startSimulator, type SimRelease, type SimulatedCapsule } from '../../src/simulator/index.js';
import { freePort, startRedisServer, type RedisServer } from '../support/redis-server.js';
import { gatewayProcess, type GatewayProcess } from '../soak/gateway-process.js';
import { waitForFinal } from '../soak/soak-checks.js';

export interface BehindRig {
  s: SimulatedCapsule;
  g: GatewayProcess;
  st: RedisStore;
  capsule: string;
}

/** Registers its own cleanup: call once at a test file's top level. */
export const behindRig = (capsule: string): ((release: SimRelease) => Promise<BehindRig>) => {
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
  return async (release) => {
    redis = await startRedisServer();
    // A short per-connection queue, so a burst the buffer still holds in full overflows it.
    sim = await startSimulator({ release, taskAcceptance: 'queue', connectionQueue: 32 });
    const watching = new Promise<void>((resolve) => sim!.on('watchers', (n: number) => n > 0 && resolve()));
    gw = gatewayProcess(await freePort(), ['--redis', redis.url, '--capsule', `${capsule}=${sim.url}`], {
      REPLICA_ID: `${capsule}-1`,
    });
    await gw.start();
    await watching;
    store = new RedisStore(redis.url, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
    return { s: sim, g: gw, st: store, capsule };
  };
};

/**
 * One small task, then `tasks` (each `{chunks, chunkBytes}`) written back to back while the gateway is
 * stopped, then one last task once it runs again; resolves once that task's final is in the log.
 */
export const writeWhileStopped = async (
  { s, g, st, capsule }: BehindRig,
  tasks: { chunks: number; chunkBytes: number }[],
): Promise<void> => {
  await s.submit('#sim {"chunks":4}').done;
  g.pause();
  const dropped = s.droppedToWatchers;
  const handles = tasks.map((t) => s.submit(`#sim ${JSON.stringify({ ...t, delayMs: 0 })}`));
  for (const h of handles) await h.done;
  // The stopped reader really fell behind: the capsule dropped frames from its connection.
  expect(s.droppedToWatchers).toBeGreaterThan(dropped);
  g.resume();
  const last = s.submit('#sim {"chunks":3}');
  await last.done;
  expect(await waitForFinal(st, capsule, last.taskId)).toBe(true);
};
