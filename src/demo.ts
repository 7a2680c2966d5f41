/**
 * `--demo`: a mixed fleet of simulated capsules in this process, one per release line (two on the
 * spec's, stateless and threaded), each running a varied never-ending workload, added to the
 * capsules the gateway fronts. Nothing here is special-cased downstream: the gateway talks to them
 * over loopback HTTP exactly as to real capsules, door tokens and the 1.0 door included.
 *
 * The demo controls both ends, so a fresh demo shows no loss that did not happen: the workloads start
 * only once the gateway watches every capsule, and the gateway is told these capsules wrote nothing
 * before (`freshCapsules`), so their first, empty replay is not a `cold-attach`.
 */
import { randomBytes } from 'node:crypto';
import type { CapsuleConfig } from './config/schema.js';
import { startSimulator, type SimRelease, type SimulatedCapsule } from './simulator/index.js';
import { startWorkload } from './simulator/workload.js';

/** How long the demo waits for the gateway to watch its capsules before starting the workloads. */
const WATCH_WAIT_MS = 10_000;

export interface Demo {
  capsules: CapsuleConfig[];
  /** For `startGateway`'s tuning: the demo's capsules wrote nothing before the gateway watches them. */
  tuning: { upstream: { freshCapsules: ReadonlySet<string> } };
  /**
   * Starts the workloads once every demo capsule is watched (each `connected` resolves when its
   * watch is acknowledged, or after its own bound). Started before, a capsule's first replay could
   * miss a task's id-0 frame, and the log would rightly say frames are possibly missing.
   */
  startWhenWatched(
    upstreams: ReadonlyMap<string, { connected(timeoutMs: number): Promise<void> }>,
  ): Promise<void>;
  stop(): Promise<void>;
}

export const startDemo = async (): Promise<Demo> => {
  const specs: { id: string; mode: 'stateless' | 'threaded'; seed: number; release: SimRelease }[] = [
    { id: 'demo-alpha', mode: 'stateless', seed: 1, release: 'spec' },
    { id: 'demo-beta', mode: 'threaded', seed: 2, release: 'spec' },
    { id: 'demo-v04', mode: 'stateless', seed: 3, release: '0.4' },
    { id: 'demo-v05', mode: 'threaded', seed: 4, release: '0.5' },
    { id: 'demo-v06', mode: 'stateless', seed: 5, release: '0.6' },
    { id: 'demo-v10', mode: 'threaded', seed: 6, release: '1.0' },
  ];
  // 0.5 and later doors want a bearer token, as a real one configured with auth would.
  const tokens = specs.map((spec) =>
    spec.release === 'spec' || spec.release === '0.4' ? null : `mdt_${randomBytes(16).toString('hex')}`,
  );
  const sims: SimulatedCapsule[] = [];
  for (const [i, spec] of specs.entries()) {
    // A human-visible pace (frames every ~80 ms), and `task_acceptance: queue` so a visitor's own
    // invoke or Flue message waits behind the workload instead of being refused as busy.
    const sim = await startSimulator({
      conversationMode: spec.mode,
      taskAcceptance: 'queue',
      frameDelayMs: 80,
      release: spec.release,
      doorToken: tokens[i] ?? null,
    });
    sims.push(sim);
  }
  const workloads: { stop(): void }[] = [];
  let stopped = false;
  return {
    capsules: specs.map((spec, i) => ({
      id: spec.id,
      url: sims[i]!.url,
      ...(tokens[i] ? { doorToken: tokens[i] } : {}),
    })),
    tuning: { upstream: { freshCapsules: new Set(specs.map((s) => s.id)) } },
    async startWhenWatched(upstreams) {
      await Promise.all(specs.map((spec) => upstreams.get(spec.id)?.connected(WATCH_WAIT_MS)));
      if (stopped || workloads.length > 0) return;
      for (const [i, spec] of specs.entries()) workloads.push(startWorkload(sims[i]!, { seed: spec.seed }));
    },
    async stop() {
      stopped = true;
      for (const w of workloads) w.stop();
      await Promise.all(sims.map((s) => s.stop()));
    },
  };
};
