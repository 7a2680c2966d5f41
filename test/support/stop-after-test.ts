/**
 * Teardown that cannot drift from set-up: what a test starts (a Redis server, a simulator, a
 * gateway, an ingestor rig, a store, a proxy) is registered where it is started and stopped when the
 * test ends, pass or fail, in the reverse order of starting (vitest runs `onTestFinished` hooks as a
 * stack). This replaces per-file `let x | null` slots and the `afterEach` that nulls them.
 */
import { onTestFinished } from 'vitest';

/** Anything a test starts and must end: servers, simulators and proxies stop; stores and gateways close. */
export type Stoppable = { stop(): unknown } | { close(): unknown };

/** Stops (or closes) `thing` when the current test ends; returns it, so a start reads as one line. */
export const stopAfterTest = <T extends Stoppable>(thing: T): T => {
  onTestFinished(async () => {
    await ('stop' in thing ? thing.stop() : thing.close());
  });
  return thing;
};

/** Runs `fn` when the current test ends, before whatever was registered earlier is stopped. */
export const atTestEnd = (fn: () => unknown): void => {
  onTestFinished(async () => {
    await fn();
  });
};
