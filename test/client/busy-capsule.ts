/**
 * Test workloads: a busy capsule (tasks back to back) and one that bursts then stays quiet; each
 * returns the last frame the capsule wrote, so a follower can wait for exactly that frame.
 */
import type { SimulatedCapsule } from '../../src/simulator/index.js';

export interface LastFrame {
  event: string;
  data: string;
}

const lastWritten = (sim: SimulatedCapsule): LastFrame => {
  const w = sim.written[sim.written.length - 1];
  if (!w) throw new Error('the capsule wrote nothing');
  return { event: w.event, data: w.data };
};

/** `tasks` tasks back to back, `chunks` text chunks each, `delayMs` between frames. */
export const runBusy = async (
  sim: SimulatedCapsule,
  tasks: number,
  chunks: number,
  delayMs: number,
): Promise<LastFrame> => {
  for (let i = 0; i < tasks; i++)
    await sim.submit(`#sim ${JSON.stringify({ chunks, thinking: 2, tools: 1, delayMs })}`).done;
  return lastWritten(sim);
};

/** Bursts separated by `quietMs` of silence (no frame, no task). */
export const runBursts = async (
  sim: SimulatedCapsule,
  bursts: number,
  quietMs: number,
  onQuiet?: (burst: number) => void,
): Promise<LastFrame> => {
  for (let b = 0; b < bursts; b++) {
    await sim.submit(`#sim ${JSON.stringify({ chunks: 30, thinking: 2, delayMs: 5 })}`).done;
    onQuiet?.(b);
    if (b < bursts - 1) await new Promise((r) => setTimeout(r, quietMs));
  }
  return lastWritten(sim);
};
