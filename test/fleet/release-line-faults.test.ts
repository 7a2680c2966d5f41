/**
 * The core faults against every later release line (the spec's line has its own, longer runs:
 * test/soak/ingestion-soak.test.ts and failover.test.ts). Two gateway processes on one real Redis
 * front a busy capsule of the line behind a cutting proxy: connection cuts, Redis paused, Redis
 * restarted from an older snapshot, and the owning replica SIGKILLed (the other takes over, the killed one comes back).
 * On 0.4 and later ids are one sequence per session, resumed exactly: the log must equal what the
 * capsule wrote with NOTHING missing; the only loss fact allowed is the store's own reset.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { startSimulator, type SimRelease, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startCutProxy, type CutProxy } from '../adapters/murmur/cut-proxy.js';
import {
  freePort,
  redisServerAvailable,
  startRedisServer,
  type RedisServer,
} from '../support/redis-server.js';
import { aroundLosses, firstLogged, waitForFinal } from '../soak/soak-checks.js';
import { gatewayProcess, type GatewayProcess } from '../soak/gateway-process.js';
import { compareLog, readAll } from '../upstream/log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const CAPSULE = 'line';
const DOOR_TOKEN = 'mdt_faults_0123456789abcdef';
const LINES: SimRelease[] = ['0.4', '0.5', '0.6', '1.0'];

let redis: RedisServer | undefined;
let sim: SimulatedCapsule | undefined;
let proxy: CutProxy | undefined;
let store: RedisStore | undefined;
let replicas: GatewayProcess[] = [];
let stopWorkload = false;
let workload: Promise<void> = Promise.resolve();

afterEach(async () => {
  stopWorkload = true;
  await workload;
  for (const r of replicas) await r.kill();
  replicas = [];
  await store?.close();
  await proxy?.close();
  await sim?.stop();
  await redis?.stop();
  store = undefined;
});

const ownerOf = async (r: GatewayProcess): Promise<string | null> => {
  const res = await fetch(`${r.url}/capsules`).catch(() => null);
  if (!res?.ok) return null;
  const body = (await res.json()) as { capsules: { id: string; owner: string | null; upstream: string }[] };
  const c = body.capsules.find((x) => x.id === CAPSULE);
  return c && c.upstream === 'connected' ? c.owner : null;
};

/** The first record after `after` matching `pred`, once logged (bounded). */
const logged = (pred: (r: LogRecord) => boolean, after = 0): Promise<LogRecord> =>
  firstLogged(store!, CAPSULE, pred, after, () => replicas.flatMap((r) => r.output.slice(-10)).join('\n'));

describe.skipIf(!haveRedis)('release lines under the core faults, two replicas on Redis', () => {
  it.each(LINES)(
    'line %s: cuts, Redis paused and rolled back, a SIGKILLed owner; the log equals what the capsule wrote',
    { timeout: 150_000 },
    async (release) => {
      redis = await startRedisServer();
      const strict = release !== '0.4';
      sim = await startSimulator({
        release,
        taskAcceptance: 'queue',
        ...(strict ? { doorToken: DOOR_TOKEN } : {}),
      });
      proxy = await startCutProxy(sim.port);
      store = new RedisStore(redis.url, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
      const env = strict ? { MURMUR_DOOR_TOKEN: DOOR_TOKEN } : {};
      for (const id of ['line-a', 'line-b']) {
        replicas.push(
          gatewayProcess(await freePort(), ['--redis', redis.url, '--capsule', `${CAPSULE}=${proxy.url}/`], {
            ...env,
            REPLICA_ID: id,
          }),
        );
      }
      await Promise.all(replicas.map((r) => r.start()));
      await proxy.waitForConnections(1, 30_000);
      const s = sim;
      const p = proxy;
      stopWorkload = false;
      workload = (async () => {
        for (let i = 0; !stopWorkload && i < 10_000; i++) {
          const script = {
            chunks: 16,
            thinking: 2,
            tools: i % 3 === 0 ? 1 : 0,
            delayMs: 30,
            reopen: i % 4 === 3,
          };
          await s.submit(`#sim ${JSON.stringify(script)}`).done;
        }
      })();

      // Cuts, each once the owner watches again.
      for (let cut = 0; cut < 6; cut++) {
        await p.waitForConnections(1, 30_000);
        await new Promise((r) => setTimeout(r, 250 + ((cut * 137) % 300)));
        p.cutAll();
      }
      await p.waitForConnections(1, 30_000);

      // Redis paused 2 s (SIGSTOP: connections open, nothing answers), then the workload goes on.
      redis.pause();
      await new Promise((r) => setTimeout(r, 2000));
      redis.resume();
      await logged((r) => r.kind === 'frame', (await store.position(CAPSULE)).head);

      // Redis restarted from an older snapshot: what the owner made durable after the SAVE is gone.
      const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
      await admin.save();
      await new Promise((r) => setTimeout(r, 800));
      admin.disconnect();
      await redis.stop('SIGKILL');
      await redis.start();
      const reset = await logged(
        (r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing' && r.reason === 'store-reset',
      );
      await logged((r) => r.kind === 'fact' && r.fact === 'upstream-connected', reset.offset);

      // The owner SIGKILLed: the other replica takes the capsule over from the log, by id.
      let owner: string | null = null;
      const deadline = Date.now() + 30_000;
      while (owner === null && Date.now() < deadline) {
        owner = (await ownerOf(replicas[0]!)) ?? (await ownerOf(replicas[1]!));
        if (owner === null) await new Promise((r) => setTimeout(r, 100));
      }
      expect(owner).not.toBeNull();
      const victim = replicas[owner === 'line-a' ? 0 : 1]!;
      const survivor = replicas[owner === 'line-a' ? 1 : 0]!;
      const beforeKill = (await store.position(CAPSULE)).head;
      await victim.kill();
      await logged((r) => r.kind === 'fact' && r.fact === 'upstream-connected', beforeKill);
      expect(await ownerOf(survivor)).toBe(owner === 'line-a' ? 'line-b' : 'line-a');
      await victim.start();

      stopWorkload = true;
      await workload;
      await s.idle();
      const last = s.submit('sentinel');
      await last.done;
      expect(await waitForFinal(store, CAPSULE, last.taskId)).toBe(true);

      const records = await readAll(store, CAPSULE);
      const result = compareLog(records, s.written);
      const around = aroundLosses(records);
      expect(result.problems, around).toEqual([]);
      // Resumed exactly by id: every frame the capsule wrote is in the log, none merely flagged.
      expect(result.covered, around).toEqual([]);
      expect(result.matched).toBe(s.written.length);
      expect(
        records.flatMap((r) => (r.kind === 'fact' && r.fact === 'frames-possibly-missing' ? [r.reason] : [])),
      ).toEqual(['store-reset']);
      expect(records.filter((r) => r.kind === 'frame' && r.event === 'lagged')).toEqual([]);
      const connected = records.filter((r) => r.kind === 'fact' && r.fact === 'upstream-connected');
      expect(connected.every((r) => r.kind === 'fact' && r.release === release)).toBe(true);
      for (const r of replicas) expect(r.output.join('\n')).not.toContain(DOOR_TOKEN);
    },
  );
});
