/**
 * Property: whatever the interleaving of tasks, the batching of appends, the moments reads happen,
 * page sizes and cursors, a live tail or none, count retention and store resets, every context's
 * readContext equals (without retention: exactly; with it: at least) what a whole-capsule read
 * attributes to it or to no context.
 */
import fc from 'fast-check';
import { beforeAll, describe, it } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { checkContexts } from './context-check.js';
import { buildLog, recordTasks, type RecordedTask } from './context-workload.js';
import { collect, type Collector } from './helpers.js';

let tasks: RecordedTask[] = [];
beforeAll(async () => {
  tasks = await recordTasks();
}, 60_000);

type Op =
  | { op: 'append'; n: number }
  | { op: 'check'; limit: number | null; afterFraction: number }
  | { op: 'reset' }
  | { op: 'tail' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ op: fc.constant('append' as const), n: fc.integer({ min: 1, max: 30 }) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('check' as const),
      limit: fc.option(fc.integer({ min: 1, max: 9 })),
      afterFraction: fc.constantFrom(0, 0, 0.3, 0.8),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'reset' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'tail' as const }) },
);

describe('readContext property', () => {
  it('equals the whole-capsule attribution on random workloads', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.boolean(),
        fc.integer({ min: 3, max: 40 }),
        fc.array(opArb, { minLength: 1, maxLength: 25 }),
        async (seed, retained, pageSize, ops) => {
          const store = new MemoryStore(retained ? { maxRecords: 45, maxAgeMs: 0 } : undefined);
          const hub = new Hub(store, { pageSize, dissolveMs: 60_000 });
          const log = buildLog(tasks, seed);
          const exact = !retained;
          let at = 0;
          let tail: Collector | null = null;
          try {
            for (const step of ops) {
              if (step.op === 'append' && at < log.length) {
                await store.append('c', log.slice(at, at + step.n));
                at += step.n;
              } else if (step.op === 'check') {
                const { limit, afterFraction } = step;
                await checkContexts(hub, store, 'c', { exact, afterFraction, ...(limit ? { limit } : {}) });
              } else if (step.op === 'reset') {
                const { head } = await store.position('c');
                await store.append('c', [], { floor: head + 100 });
              } else if (step.op === 'tail' && !tail) {
                tail = collect(hub, 'c', { after: (await store.position('c')).head });
              }
            }
            await store.append('c', log.slice(at));
            await checkContexts(hub, store, 'c', { exact });
            await checkContexts(hub, store, 'c', { exact, limit: 4 });
          } finally {
            tail?.sub.close();
            await hub.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  }, 120_000);
});
