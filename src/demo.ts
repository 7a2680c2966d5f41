/**
 * `--demo`: two simulated capsules in this process, each running a varied never-ending workload, added
 * to the capsules the gateway fronts. Nothing here is special-cased downstream: the gateway talks to
 * them over loopback HTTP exactly as to real capsules.
 */
import type { CapsuleConfig } from './config/schema.js';
import { startSimulator, type SimulatedCapsule } from './simulator/index.js';
import { startWorkload } from './simulator/workload.js';

export interface Demo {
  capsules: CapsuleConfig[];
  stop(): Promise<void>;
}

export const startDemo = async (): Promise<Demo> => {
  const specs = [
    { id: 'demo-alpha', mode: 'stateless' as const, seed: 1 },
    { id: 'demo-beta', mode: 'threaded' as const, seed: 2 },
  ];
  const sims: SimulatedCapsule[] = [];
  const workloads: { stop(): void }[] = [];
  for (const spec of specs) {
    // A human-visible pace (frames every ~80 ms), and `task_acceptance: queue` so a visitor's own
    // invoke or Flue message waits behind the workload instead of being refused as busy.
    const sim = await startSimulator({
      conversationMode: spec.mode,
      taskAcceptance: 'queue',
      frameDelayMs: 80,
    });
    sims.push(sim);
    workloads.push(startWorkload(sim, { seed: spec.seed }));
  }
  return {
    capsules: specs.map((spec, i) => ({ id: spec.id, url: sims[i]!.url })),
    async stop() {
      for (const w of workloads) w.stop();
      await Promise.all(sims.map((s) => s.stop()));
    },
  };
};
