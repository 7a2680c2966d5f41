/**
 * Two gateway replicas on one real Redis in front of one simulated capsule, for the cross-replica
 * tests: which replica owns (ingests) the capsule is read from `/capsules`, so each test can act on
 * the owner and on the other one. Waits are bounded polls of public routes, never fixed sleeps.
 */
import { randomUUID } from 'node:crypto';
import type { DispatchTuning } from '../../src/core/dispatcher.js';
import { rendezvous } from '../../src/fleet/replicas.js';
import { startSimulator, type SimulatedCapsule, type SimulatorOptions } from '../../src/simulator/index.js';
import {
  startTestGateway,
  TEST_OPS_HEADERS,
  type TestGateway,
  type TestGatewayOptions,
} from '../support/gateway.js';
import { until } from '../support/deadlines.js';
import { uniqueCapsule } from '../support/redis.js';

export interface CrossReplicaRig {
  capsule: string;
  sim: SimulatedCapsule;
  /** The replica ingesting the capsule. */
  owner: TestGateway;
  /** A replica that does not ingest it. */
  other: TestGateway;
  close(): Promise<void>;
}

/** The shared poll, its deadline scaled to the machine's load (test/support/deadlines.ts). */
export { until };

interface CapsulesView {
  replica: string;
  capsules: { id: string; owner: string | null; upstream: string; conversation_mode: string }[];
}

export const capsulesOf = async (gw: TestGateway): Promise<CapsulesView> =>
  (await (await fetch(`${gw.baseUrl}/capsules`, { headers: TEST_OPS_HEADERS })).json()) as CapsulesView;

export const startCrossReplica = async (
  redisUrl: string,
  options: {
    sim?: SimulatorOptions;
    config?: TestGatewayOptions['config'];
    /** The dispatcher's tuning (e.g. an idle poll too long to explain a hand-off). */
    queue?: DispatchTuning;
  } = {},
): Promise<CrossReplicaRig> => {
  const sim = await startSimulator({ heartbeatMs: 200, ...options.sim });
  const capsule = uniqueCapsule('xr');
  const fleetId = randomUUID();
  const registryKey = `mg:fleet:capsules:test-${fleetId}`;
  // Its own live-replica set too: ranked among every replica of the files running beside it, the
  // capsule would prefer one that never fronts it, sit free for a lease TTL, be taken as a
  // fallback, and move again every few TTLs (the owner found below would not stay the owner).
  const keyPrefix = `mg-test-${fleetId}`;
  const start = () =>
    startTestGateway({
      capsules: { [capsule]: sim.url },
      redisUrl,
      ...(options.config ? { config: options.config } : {}),
      // Old code waited 60 s for a queued task's start it could never see: fail sooner than that.
      tuning: {
        upstream: { backoffBaseMs: 20, backoffCapMs: 200, submitTimeoutMs: 15_000 },
        fleet: { registryKey, keyPrefix },
        ...(options.queue ? { queue: options.queue } : {}),
      },
    });
  const gateways = [await start(), await start()];
  const close = async () => {
    await Promise.all(gateways.map((g) => g.close()));
    await sim.stop();
  };
  try {
    // Owned by the replica the fleet ranks first for it, and its watch connected (the ack read),
    // before anything is submitted. The first replica up takes the capsule alone and hands it over
    // once it sees the second one live, if that one ranks first: an owner read before then would
    // not stay the owner.
    const replicaIds = (await Promise.all(gateways.map(capsulesOf))).map((v) => v.replica);
    const preferred = rendezvous(capsule, replicaIds);
    await until(async () => {
      const views = await Promise.all(gateways.map(capsulesOf));
      const rows = views.map((v) => v.capsules.find((c) => c.id === capsule));
      if (!rows.every((row) => row?.owner === preferred)) return undefined;
      const own = rows[replicaIds.indexOf(preferred)];
      return own?.upstream === 'connected' ? true : undefined;
    }, 15_000);
    const i = replicaIds.indexOf(preferred);
    return { capsule, sim, owner: gateways[i]!, other: gateways[1 - i]!, close };
  } catch (err) {
    await close();
    throw err;
  }
};

/** Resolves when the simulator's runner receives a task whose text is `text` (it is then queued or running). */
export const capsuleReceives = (sim: SimulatedCapsule, text: string): Promise<void> => {
  // The simulator's runner of the current session: its submit is wrapped to observe arrivals.
  const runner = (sim as unknown as { current: { runner: { submit: (t: string, c?: string) => unknown } } })
    .current.runner;
  const original = runner.submit.bind(runner);
  return new Promise<void>((resolve) => {
    runner.submit = (t: string, c?: string) => {
      const result = original(t, c);
      if (t === text) {
        runner.submit = original;
        resolve();
      }
      return result;
    };
  });
};
