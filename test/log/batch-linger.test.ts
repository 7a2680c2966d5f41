/**
 * Group commit of busy capsules (src/log/batch-linger.ts): above the rate a capsule appends once per
 * linger period with nothing lost or reordered; below it every entry goes at once; a pause ends the
 * busy state; flush() and close() never wait for a lingering batch. Time is vitest's fake clock, so
 * "at once" means without the clock moving.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LogWriter, type Appended } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogEntry } from '../../src/log/record.js';
import type { AppendOptions, AppendResult } from '../../src/log/store.js';
import { frame, readAll } from './store.contract.js';

/** A real MemoryStore that counts its append calls. */
class CountingStore extends MemoryStore {
  calls = 0;
  override append(capsule: string, entries: LogEntry[], options?: AppendOptions): Promise<AppendResult> {
    this.calls++;
    return super.append(capsule, entries, options);
  }
}

/** Settle promises without moving the fake clock. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

const writers: LogWriter[] = [];
const newWriter = (store: MemoryStore, lingerMs: number): LogWriter => {
  const w = new LogWriter(store, { appendLingerMs: lingerMs, lingerAboveRate: 1000 });
  writers.push(w);
  return w;
};

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
});
afterEach(async () => {
  await Promise.all(writers.splice(0).map((w) => w.close()));
  vi.useRealTimers();
});

/** `perMs` entries every millisecond for `ms` milliseconds; resolves with every append's result. */
const stream = async (writer: LogWriter, capsule: string, perMs: number, ms: number, from = 0) => {
  const results: Promise<Appended>[] = [];
  for (let t = from; t < from + ms; t++) {
    for (let i = 0; i < perMs; i++) results.push(writer.append(capsule, frame(`${t}:${i}`)));
    await vi.advanceTimersByTimeAsync(1);
  }
  return results;
};

describe('LogWriter group commit (appendLingerMs)', () => {
  it('appends a busy capsule once per linger period, in order, nothing lost', async () => {
    const calls: Record<string, number> = {};
    for (const lingerMs of [0, 10]) {
      const store = new CountingStore();
      const writer = newWriter(store, lingerMs);
      const base = (await store.position('c')).head;
      const results = await stream(writer, 'c', 5, 100); // 5,000/s: busy after the first window
      const before = store.calls;
      results.push(...(await stream(writer, 'c', 5, 200, 100)));
      calls[lingerMs] = store.calls - before;
      await writer.flush();
      const offsets = (await Promise.all(results)).map((a) => a.offset);
      expect(offsets).toEqual(Array.from({ length: 1500 }, (_, i) => base + i + 1));
      const records = await readAll(store, 'c');
      expect(records.map((r) => (r.kind === 'frame' ? r.upstreamId : r.kind))).toEqual(
        Array.from({ length: 1500 }, (_, i) => `${Math.floor(i / 5)}:${i % 5}`),
      );
    }
    expect(calls[0]).toBeGreaterThanOrEqual(199); // a call per millisecond without the linger
    expect(calls[10]).toBeGreaterThanOrEqual(19); // one per 10 ms with it
    expect(calls[10]).toBeLessThanOrEqual(21);
  });

  it('sends an ordinary capsule every entry at once, and the first entry after a pause', async () => {
    const store = new CountingStore();
    const writer = newWriter(store, 10);
    const landed = async (label: string): Promise<boolean> => {
      let done = false;
      void writer.append('c', frame(label)).then(() => (done = true));
      await settle();
      return done;
    };
    // 500/s: below the rate, every entry is durable before the clock moves.
    for (let i = 0; i < 150; i++) {
      expect(await landed(`slow:${i}`)).toBe(true);
      await vi.advanceTimersByTimeAsync(2);
    }
    await stream(writer, 'c', 5, 200); // busy now
    expect(await landed('busy')).toBe(false); // waits for its period
    await vi.advanceTimersByTimeAsync(10);
    await vi.advanceTimersByTimeAsync(200); // a pause longer than the rate window
    expect(await landed('after the pause')).toBe(true);
  });

  it('flush() sends a lingering batch at once, and close() cancels its wait', async () => {
    const store = new CountingStore();
    const writer = newWriter(store, 1000);
    await stream(writer, 'c', 5, 150);
    await writer.flush(); // drain what the last periods held
    let flushed = false;
    const last = writer.append('c', frame('last'));
    await settle();
    void writer.flush('c').then(() => (flushed = true));
    await settle();
    expect(flushed).toBe(true);
    expect((await last).offset).toBe((await store.position('c')).head);
    void writer.append('c', frame('never sent')).catch(() => {});
    await settle();
    await writer.close();
    expect(vi.getTimerCount()).toBe(0); // no linger timer left behind
  });
});
