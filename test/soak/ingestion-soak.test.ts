/**
 * Ingestion soak: one busy capsule, the gateway in its own process on real
 * Redis, and every fault the log must survive, injected for real, one after another:
 *   30 network cuts between gateway and capsule (a TCP proxy that drops both sides),
 *   Redis restarted from an older snapshot (records the gateway already made durable are gone),
 *   Redis down for 5 s (connection refused),
 *   the gateway's whole process stalled for 2 s (SIGSTOP: its event loop and socket reads stop),
 *   the gateway SIGKILLed and started again.
 * Then the log must equal what the capsule wrote, minus frames the protocol makes unrecoverable
 * (id-0 frames a replay from 0 never carries), each of those flagged by a fact; zero duplicates.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startCutProxy, type CutProxy } from '../adapters/murmur/cut-proxy.js';
import {
  freePort,
  redisServerAvailable,
  startRedisServer,
  type RedisServer,
} from '../support/redis-server.js';
import { compareLog, readAll } from '../upstream/log-vs-written.js';
import { aroundLosses, firstLogged, waitForFinal } from './soak-checks.js';
import { gatewayProcess, type GatewayProcess } from './gateway-process.js';

/** One line per phase on stderr: a soak that stalls says where. */
const t0 = Date.now();
const phase = (name: string): void => {
  process.stderr.write(`[soak +${((Date.now() - t0) / 1000).toFixed(1)}s] ${name}\n`);
};

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const CAPSULE = 'soak';

interface CapsuleView {
  id: string;
  upstream: string;
  reconnects: number;
  head: number;
  epoch: number;
}

/** The gateway's own view of the capsule (public `/capsules`). */
const capsuleView = async (gw: GatewayProcess): Promise<CapsuleView> => {
  const res = await fetch(`${gw.url}/capsules`);
  const body = (await res.json()) as { capsules: CapsuleView[] } | CapsuleView[];
  const list = Array.isArray(body) ? body : body.capsules;
  const view = list.find((c) => c.id === CAPSULE);
  if (!view) throw new Error('capsule missing from /capsules');
  return view;
};

describe.skipIf(!haveRedis)('ingestion soak: cuts, Redis rollback and outage, stall, SIGKILL', () => {
  let redis: RedisServer;
  let sim: SimulatedCapsule;
  let proxy: CutProxy;
  let gw: GatewayProcess;
  let store: RedisStore;
  let stopWorkload = false;
  let workload: Promise<void> = Promise.resolve();

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator({ taskAcceptance: 'queue' });
    proxy = await startCutProxy(sim.port);
    // A fixed replica id, as a deployment slot keeps across restarts: the restarted process takes
    // its capsule back at once instead of waiting out its previous incarnation's lease.
    gw = gatewayProcess(await freePort(), ['--redis', redis.url, '--capsule', `${CAPSULE}=${proxy.url}/`], {
      REPLICA_ID: 'soak-1',
    });
    await gw.start();
    store = new RedisStore(redis.url, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
  });

  afterAll(async () => {
    stopWorkload = true;
    await workload;
    await gw?.kill();
    await store?.close();
    await proxy?.close();
    await sim?.stop();
    await redis?.stop();
  });

  /** The first record after `after` matching `pred`, once the log has one (bounded wait on the store). */
  const logged = (pred: (r: LogRecord) => boolean, after = 0): Promise<LogRecord> =>
    firstLogged(store, CAPSULE, pred, after, () => gw.output.slice(-25).join('\n'));

  /** Wait (bounded) for the gateway's watch through the proxy; the proxy wakes us on each connection. */
  const watching = (): Promise<void> => proxy.waitForConnections(1, 30_000);

  it(
    'the log equals what the capsule wrote; losses flagged, zero duplicates',
    { timeout: 180_000 },
    async () => {
      await watching();
      // A busy capsule: tasks back to back, each ~25 frames over ~0.8 s, some reopened (repeated frames).
      // About 30 frames/s, so the capsule's 512-frame buffer spans ~15 s: a recovery on a loaded machine
      // (a gateway process restarting under tsx can take seconds) still finds what it needs there.
      workload = (async () => {
        for (let i = 0; !stopWorkload && i < 10_000; i++) {
          const reopen = i % 5 === 4;
          await sim.submit(`#sim ${JSON.stringify({ chunks: 20, thinking: 2, delayMs: 35, reopen })}`).done;
        }
      })();

      phase('workload started; 30 cuts');
      // 30 cuts, 0.3-0.7 s apart, each after the gateway is watching again.
      for (let cut = 0; cut < 30; cut++) {
        await watching();
        await new Promise((r) => setTimeout(r, 300 + ((cut * 137) % 400)));
        proxy.cutAll();
      }
      await watching();

      phase('redis rollback');
      // Redis restarted from an older snapshot: SAVE, let ~1 s of frames become durable, crash, restart.
      const epochBefore = (await store.position(CAPSULE)).epoch;
      const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
      await admin.save();
      await new Promise((r) => setTimeout(r, 1000));
      admin.disconnect();
      const handedOut = (await store.position(CAPSULE)).head;
      await redis.stop('SIGKILL');
      await redis.start();
      // The gateway finds the rollback on its next append (a new epoch whose first record is the
      // store-reset fact, offsets above all it handed out), re-reads its tail and reconnects: the
      // capsule's replay restores what Redis lost. Each fault is let recover before the next one, so
      // the capsule's 512-frame buffer still holds what a recovery needs.
      const reset = await logged(
        (r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing' && r.reason === 'store-reset',
      );
      await logged((r) => r.kind === 'fact' && r.fact === 'upstream-connected', reset.offset);

      phase('redis down 5 s');
      // Redis down for 5 s, with its data kept (clean shutdown with a save).
      const admin2 = new Redis(redis.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
      await admin2.call('SHUTDOWN', 'SAVE').catch(() => undefined);
      admin2.disconnect();
      await redis.stop('SIGKILL');
      await new Promise((r) => setTimeout(r, 5000));
      await redis.start();
      const back = (await store.position(CAPSULE)).head;
      await logged((r) => r.kind === 'frame', back);

      phase('gateway stalled 2 s');
      // The gateway's whole process stalled for 2 s mid-workload.
      gw.pause();
      await new Promise((r) => setTimeout(r, 2000));
      gw.resume();

      phase('gateway SIGKILL');
      // SIGKILL and start again: what was not durable is restored from the capsule's replay.
      await logged((r) => r.kind === 'frame', (await store.position(CAPSULE)).head);
      const beforeKill = (await store.position(CAPSULE)).head;
      await gw.kill();
      await gw.start();
      await watching();
      await logged((r) => r.kind === 'fact' && r.fact === 'upstream-connected', beforeKill);

      phase('settling');
      // Settle: stop the workload, then one last task whose final status must reach the log.
      stopWorkload = true;
      await workload;
      await sim.idle();
      const last = sim.submit('sentinel');
      await last.done;
      expect(await waitForFinal(store, CAPSULE, last.taskId)).toBe(true);

      phase('comparing');
      const records = await readAll(store, CAPSULE);
      const result = compareLog(records, sim.written);
      // On failure, show the log around every loss fact: what was stored before it and after it.
      const around = aroundLosses(records);
      expect(result.problems, around).toEqual([]);
      // Only id-0 frames may be missing (a replay from 0 never carries them): everything else was
      // restored by a replay, however it was lost on the way.
      expect(
        result.covered.filter((c) => c.frame.id !== '0'),
        around,
      ).toEqual([]);
      expect(result.matched).toBeGreaterThan(sim.written.length * 0.9);
      // Offsets strictly increase across the whole log, rollback included.
      for (let i = 1; i < records.length; i++)
        expect(records[i]!.offset).toBeGreaterThan(records[i - 1]!.offset);
      // The rollback was noticed: a new epoch whose first record is the store-reset fact.
      const { epoch } = await store.position(CAPSULE);
      expect(epoch).not.toBe(epochBefore);
      expect(reset.offset).toBeGreaterThan(handedOut);
      expect(records.find((r) => r.offset === reset.offset)).toMatchObject({ reason: 'store-reset' });
      // The restarted gateway is watching the capsule again, as /capsules says.
      expect((await capsuleView(gw)).upstream).toBe('connected');
    },
  );
});
