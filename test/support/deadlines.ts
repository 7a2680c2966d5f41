/**
 * How long tests wait, on a machine that may be busy. A deadline for "the system does this within
 * seconds" is a bound on a poll, never a timed assertion: on a loaded 2-core machine the same work
 * takes several times longer, so every such deadline here scales with the load per core (or with
 * TEST_DEADLINE_SCALE), and a store a test opens for its own reads does not share the product's
 * short command timeout (a test's read that times out is the test failing, not the product).
 */
import { availableParallelism, loadavg } from 'node:os';

/** 1 on an idle machine, up to 4 under load; TEST_DEADLINE_SCALE (a number ≥ 1) overrides it. */
export const deadlineScale = (): number => {
  const forced = Number(process.env.TEST_DEADLINE_SCALE);
  if (Number.isFinite(forced) && forced >= 1) return forced;
  const perCore = loadavg()[0]! / Math.max(1, availableParallelism());
  return Math.min(4, Math.max(1, 1 + perCore));
};

/** `ms` as a deadline on this machine now. */
export const scaled = (ms: number): number => Math.round(ms * deadlineScale());

/** Poll `check` every 50 ms until it returns a value (not undefined), at most `scaled(ms)`. */
export const until = async <T>(check: () => Promise<T | undefined>, ms: number): Promise<T> => {
  const bound = scaled(ms);
  const deadline = Date.now() + bound;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not within ${bound} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/**
 * The command timeout of a Redis store a test opens to read and check the log (the product's is
 * 2 s): generous, so a read queued behind a busy machine or a Redis coming back waits, not fails.
 */
export const TEST_READER_TIMEOUT_MS = 20_000;
