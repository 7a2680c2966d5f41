/**
 * A never-ending, varied demo workload for a simulated capsule: text chunks, thinking, tools,
 * failures, input waits and a reopened task, with pauses. Seeded, so a demo run is repeatable.
 */
import type { SimulatedCapsule } from './index.js';

export interface WorkloadOptions {
  seed?: number;
  /** Pause between tasks (ms); default 400-1500 picked by the seeded generator. */
  pauseMs?: number;
}

/** mulberry32: a tiny seeded PRNG (deterministic demo runs and replayable test workloads). */
export const prng = (seed: number): (() => number) => {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};

const QUESTIONS = [
  'Summarise README.md',
  'What changed in the last release?',
  'List the open issues',
  'Explain the build',
];

/** The rotation of task kinds; each returns the message text that selects its script. */
const KINDS: ((r: () => number) => string)[] = [
  (r) => QUESTIONS[Math.floor(r() * QUESTIONS.length)] ?? 'hello',
  (r) => `#sim ${JSON.stringify({ chunks: 3 + Math.floor(r() * 8), thinking: 2, delayMs: 120 })}`,
  (r) => `#sim ${JSON.stringify({ tools: 1 + Math.floor(r() * 3), chunks: 4, thinking: 1, delayMs: 150 })}`,
  () =>
    `#sim ${JSON.stringify({ tools: 2, toolError: true, fail: 'max_turns exceeded: the task used all 2 inference turns', turns: 2, delayMs: 150 })}`,
  () =>
    `#sim ${JSON.stringify({ input: { prompt: 'Which branch?', outcome: 'answer', afterMs: 1200 }, chunks: 3, delayMs: 150 })}`,
  () =>
    `#sim ${JSON.stringify({ input: { prompt: 'Proceed with deploy?', outcome: 'timeout', afterMs: 1500 }, chunks: 2, delayMs: 150 })}`,
  () => `#sim ${JSON.stringify({ reply: 'A whole reply, written at once.', delayMs: 200 })}`,
  () => `#sim ${JSON.stringify({ chunks: 3, thinking: 1, reopen: true, delayMs: 120 })}`,
];

/** Submit tasks forever (one at a time, waiting for idle) until stop(). */
export const startWorkload = (capsule: SimulatedCapsule, opts: WorkloadOptions = {}): { stop(): void } => {
  const r = prng(opts.seed ?? 1);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let turn = 0;
  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      timer = setTimeout(resolve, ms);
    });
  const loop = async (): Promise<void> => {
    while (!stopped) {
      const kind = KINDS[turn % KINDS.length] ?? KINDS[0];
      turn += 1;
      try {
        if (kind) capsule.submit(kind(r));
        await capsule.idle();
      } catch {
        // task_acceptance none or a stopped capsule: nothing to run; keep pacing until stopped.
      }
      await sleep(opts.pauseMs ?? 400 + Math.floor(r() * 1100));
    }
  };
  void loop();
  return {
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
};
