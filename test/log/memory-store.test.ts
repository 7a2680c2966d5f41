/**
 * The store contract on the embedded store, plus what only it can show (waiters leave no trace, a
 * new process starts a new epoch above the time floor).
 */
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/log/memory-store.js';
import { frame, runStoreContract } from './store.contract.js';

runStoreContract('memory', (retention) => new MemoryStore(retention));

/** The parked waiters of one capsule (private state, read only to prove nothing leaks). */
const waiters = (store: MemoryStore, capsule: string): number =>
  (store as unknown as { logs: Map<string, { waiters: Set<unknown> }> }).logs.get(capsule)?.waiters.size ??
  -1;

describe('MemoryStore', () => {
  it('removes an aborted or timed-out waiter at once', async () => {
    const store = new MemoryStore();
    const ac = new AbortController();
    const aborted = store.waitAfter('c', 0, 10, 60_000, ac.signal);
    const timed = store.waitAfter('c', 0, 10, 20);
    expect(waiters(store, 'c')).toBe(2);
    ac.abort();
    expect((await aborted).records).toEqual([]);
    expect(waiters(store, 'c')).toBe(1);
    expect((await timed).records).toEqual([]);
    expect(waiters(store, 'c')).toBe(0);
    const woken = store.waitAfter('c', 0, 10, 60_000);
    await store.append('c', [frame('a')]);
    expect((await woken).records).toHaveLength(1);
    expect(waiters(store, 'c')).toBe(0);
    await store.close();
  });

  it('starts every log of a new store (a restarted process) in a new epoch above every earlier offset', async () => {
    const before = new MemoryStore();
    const old = await before.append('c', [frame('a')]);
    const restarted = new MemoryStore();
    const now = await restarted.append('c', [frame('b')]);
    expect(now.epoch).not.toBe(old.epoch);
    // Offsets start at the µs since 2026-01-01: at most one per µs was handed out before.
    expect(now.offsets[0]).toBeGreaterThan(old.offsets[0]!);
  });

  it('resolves parked waiters empty on close', async () => {
    const store = new MemoryStore();
    const waiting = store.waitAfter('c', 0, 10, 60_000);
    await store.close();
    expect((await waiting).records).toEqual([]);
  });

  it('hands out frozen records: a reader cannot change the log', async () => {
    const store = new MemoryStore();
    const entry = frame('a');
    await store.append('c', [entry]);
    entry.data = 'changed by the caller';
    const [record] = (await store.read('c', 0, 1)).records;
    expect(record).toMatchObject({ data: JSON.stringify({ label: 'a' }) });
    expect(Object.isFrozen(record)).toBe(true);
  });

  it('keeps offsets contiguous across compaction of a long retained log', async () => {
    const store = new MemoryStore({ maxRecords: 100, maxAgeMs: 0 });
    const b = (await store.position('c')).head;
    for (let i = 1; i <= 5000; i++) await store.append('c', [frame(String(i))]);
    const { records, position } = await store.read('c', 0, 1000);
    expect(position).toMatchObject({ head: b + 5000, first: b + 4901 });
    expect(records.map((r) => r.offset)).toEqual(Array.from({ length: 100 }, (_, i) => b + 4901 + i));
    expect(records.map((r) => (r.kind === 'frame' ? r.upstreamId : ''))).toEqual(
      Array.from({ length: 100 }, (_, i) => String(4901 + i)),
    );
  });
});
