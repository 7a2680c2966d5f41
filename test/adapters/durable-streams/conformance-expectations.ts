/**
 * Where `@durable-streams/server-conformance-tests` 0.3.6 and the protocol text disagree, each with
 * the reason. The gateway follows the protocol text, so each listed case is marked expected to fail
 * (vitest `fails`): a listed case that passes fails the run, and so does an entry that names no
 * case run, so the list can neither grow silently nor go stale.
 */
import type { RunnerTask, RunnerTestCase } from 'vitest';

/**
 * Full case name (describe titles and the test title, joined by ' > ') → why it must fail. Empty:
 * every case of this suite version passes on both stores, the subscription group included.
 */
export const EXPECTED_FAILURES: ReadonlyMap<string, string> = new Map<string, string>([]);

/** The title of the describe each store's run sits in; case names start below it. */
export const STORE_SUITE_PREFIX = 'Durable Streams conformance';

/** The describe titles and the test title below the store's own describe. */
const caseName = (task: RunnerTask): string => {
  const names: string[] = [];
  for (let t: RunnerTask | undefined = task; t && !t.name.startsWith(STORE_SUITE_PREFIX); t = t.suite) {
    names.unshift(t.name);
  }
  return names.join(' > ');
};

interface Hooks {
  beforeEach(fn: (ctx: { task: RunnerTask }) => void): void;
  afterAll(fn: () => void): void;
}

/** Marks the listed cases `fails` before each runs; after all, checks that every entry met a case. */
export const expectListedFailures = (hooks: Hooks): void => {
  const seen = new Set<string>();
  hooks.beforeEach(({ task }) => {
    const name = caseName(task);
    if (EXPECTED_FAILURES.has(name)) {
      seen.add(name);
      (task as RunnerTestCase).fails = true;
    }
  });
  hooks.afterAll(() => {
    const stale = [...EXPECTED_FAILURES.keys()].filter((n) => !seen.has(n));
    if (stale.length > 0)
      throw new Error(`conformance expectations that name no case run: ${stale.join('; ')}`);
  });
};
