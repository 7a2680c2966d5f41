/**
 * Per-context reads (Hub.readContext): on recorded simulator workloads, every context's read returns
 * what a whole-capsule read attributes to it or to no context, in order, pageable with `next`, with
 * and without a live tail, across retention trimming and a new store epoch.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogStore } from '../../src/log/store.js';
import { buildLog, CONTEXTS, recordTasks, type RecordedTask } from './context-workload.js';
import { checkContexts } from './context-check.js';
import { collect, WrappedStore } from './helpers.js';

let tasks: RecordedTask[] = [];
beforeAll(async () => {
  tasks = await recordTasks();
}, 60_000);

const hubOn = (store: LogStore): Hub => new Hub(store, { pageSize: 37, dissolveMs: 60_000 });

describe('readContext', () => {
  it('the recording has every kind of record the index must attribute', () => {
    const events = new Set(tasks.flatMap((t) => t.frames.map((f) => f.event)));
    for (const e of ['status', 'text', 'thinking', 'artifact']) expect(events).toContain(e);
    // Some frames name no context: they are attributed through their task's earlier frames.
    const loose = tasks.flatMap((t) => t.frames).filter((f) => !f.data.includes('"context_id"'));
    expect(loose.length).toBeGreaterThan(0);
    // And some follow their task's final status (a reopen, an input-timeout's artifact).
    const afterFinal = tasks.filter((t) => {
      const end = t.frames.findIndex((f) => f.event === 'status' && f.data.includes('"final":true'));
      return end >= 0 && end < t.frames.length - 1;
    });
    expect(afterFinal.length).toBeGreaterThan(0);
  });

  it('answers each context with its records and the unattributed ones, read whole or in pages', async () => {
    const store = new MemoryStore();
    const hub = hubOn(store);
    const log = buildLog(tasks, 1);
    for (let i = 0; i < log.length; i += 25) await store.append('c', log.slice(i, i + 25));
    await checkContexts(hub, store, 'c', { exact: true });
    await checkContexts(hub, store, 'c', { exact: true, limit: 7 });
    await checkContexts(hub, store, 'c', { exact: true, limit: 1, afterFraction: 0.5 });
    expect(hub.stats().contextIndex).toMatchObject({ capsules: 1, records: log.length });
    await hub.close();
  });

  it('follows the log as it grows, through the tail and through store reads alike', async () => {
    const store = new MemoryStore();
    const hub = hubOn(store);
    const log = buildLog(tasks, 2);
    const third = Math.floor(log.length / 3);
    await store.append('c', log.slice(0, third));
    await checkContexts(hub, store, 'c', { exact: true });
    // A live subscriber starts the tail loop: later records reach the index from its batches.
    const keep = collect(hub, 'c', { after: (await store.position('c')).head });
    for (let i = third; i < log.length; i += 11) {
      await store.append('c', log.slice(i, i + 11));
      if (i % 3 === 0) await checkContexts(hub, store, 'c', { exact: true });
    }
    await keep.until((await store.position('c')).head);
    await checkContexts(hub, store, 'c', { exact: true, limit: 5 });
    keep.sub.close();
    await hub.close();
  });

  it('drops trimmed records and still returns every record of the context that is retained', async () => {
    const store = new MemoryStore({ maxRecords: 60, maxAgeMs: 0 });
    const hub = hubOn(store);
    const log = buildLog(tasks, 3);
    for (let i = 0; i < log.length; i += 9) {
      await store.append('c', log.slice(i, i + 9));
      if (i % 27 === 0) await checkContexts(hub, store, 'c', { exact: false });
    }
    await checkContexts(hub, store, 'c', { exact: false, limit: 4 });
    expect(hub.stats().contextIndex.records).toBeLessThanOrEqual(60 + 60);
    await hub.close();
  });

  it('rebuilds for a new store epoch (old records kept, reset fact first) and answers as a whole read', async () => {
    const store = new MemoryStore();
    const hub = hubOn(store);
    const log = buildLog(tasks, 4);
    const half = Math.floor(log.length / 2);
    await store.append('c', log.slice(0, half));
    await checkContexts(hub, store, 'c', { exact: true });
    const before = await store.position('c');
    const reset = await store.append('c', [], { floor: before.head + 1_000 });
    expect(reset.reset).toBe(true);
    await store.append('c', log.slice(half));
    expect((await store.position('c')).epoch).not.toBe(before.epoch);
    await checkContexts(hub, store, 'c', { exact: true });
    await checkContexts(hub, store, 'c', { exact: true, limit: 3 });
    await hub.close();
  });

  it('contextFirst is the first retained record of the context', async () => {
    const store = new MemoryStore();
    const hub = hubOn(store);
    await store.append('c', buildLog(tasks, 5));
    const { records } = await store.read('c', 0, 100_000);
    for (const c of CONTEXTS) {
      const first = records.find((r) => r.kind === 'submission' && r.contextId === c)?.offset;
      expect(await hub.contextFirst('c', c)).toBe(first);
    }
    expect(await hub.contextFirst('c', 'ctx-nobody')).toBeNull();
    await hub.close();
  });
});

describe('readContext edges', () => {
  it('limit 0 reads nothing and resumes where it was; a cursor past the head answers empty', async () => {
    const store = new MemoryStore();
    const hub = hubOn(store);
    await store.append('c', buildLog(tasks, 6));
    const { head } = await store.position('c');
    expect(await hub.readContext('c', 'ctx-a', 0, 0)).toMatchObject({ records: [], next: 0 });
    expect(await hub.readContext('c', 'ctx-a', head + 5, 10)).toMatchObject({ records: [], next: head + 5 });
    const end = await hub.readContext('c', 'ctx-a', head, 10);
    expect(end).toMatchObject({ records: [], next: head, position: { head } });
    await hub.close();
  });

  it('an index unused for contextIdleMs is dropped, and rebuilt on the next read', async () => {
    const store = new MemoryStore();
    const hub = new Hub(store, { contextIdleMs: 20 });
    await store.append('c', buildLog(tasks, 7));
    const first = await hub.readContext('c', 'ctx-b', 0, 10_000);
    expect(hub.stats().contextIndex.capsules).toBe(1);
    await vi.waitFor(() => expect(hub.stats().contextIndex.capsules).toBe(0));
    expect(await hub.readContext('c', 'ctx-b', 0, 10_000)).toEqual(first);
    await hub.close();
  });
});

describe('readContext reads the log once', () => {
  it('50 concurrent reads of a cold index share one catch-up page, then read only their runs', async () => {
    const pages: number[] = [];
    class Counting extends WrappedStore {
      override read(capsule: string, after: number, limit: number) {
        if (limit === 1000) pages.push(after);
        return super.read(capsule, after, limit);
      }
    }
    const store = new Counting(new MemoryStore());
    const hub = new Hub(store, { pageSize: 1000 });
    const log = buildLog(tasks, 8);
    expect(log.length).toBeLessThan(1000);
    await store.append('c', log);
    const reads = await Promise.all(
      Array.from({ length: 50 }, (_, i) => hub.readContext('c', CONTEXTS[i % 4]!, 0, 10_000)),
    );
    expect(pages).toEqual([0]);
    for (const [i, page] of reads.entries()) {
      expect(page).toEqual(await hub.readContext('c', CONTEXTS[i % 4]!, 0, 10_000));
    }
    expect(pages).toEqual([0]);
    await checkContexts(hub, store, 'c', { exact: true });
    await hub.close();
  });

  it('a log lost and begun again under a new epoch is indexed afresh', async () => {
    const store = new WrappedStore(new MemoryStore(), () => new MemoryStore());
    const hub = hubOn(store);
    await store.append('c', buildLog(tasks, 9));
    await checkContexts(hub, store, 'c', { exact: true });
    store.loseLog();
    await store.append('c', buildLog(tasks, 10).slice(0, 40));
    await checkContexts(hub, store, 'c', { exact: true });
    await checkContexts(hub, store, 'c', { exact: true, limit: 3 });
    await hub.close();
  });
});
