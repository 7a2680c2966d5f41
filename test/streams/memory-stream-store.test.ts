/** The StreamStore contracts (streams, forks) on the embedded store, and a page it hands out again. */
import { describe, expect, it } from 'vitest';
import { MemoryStreamStore } from '../../src/streams/memory-stream-store.js';
import { runForkContract } from './stream-store-forks.contract.js';
import { runStreamStoreContract } from './stream-store.contract.js';

const factory = (maxStreams = 1000, maxStreamsPerOwner?: number): MemoryStreamStore =>
  new MemoryStreamStore({ maxStreams, ...(maxStreamsPerOwner ? { maxStreamsPerOwner } : {}) });
runStreamStoreContract('memory', factory);
runForkContract('memory', factory);

describe('memory store: a page read again', () => {
  const text = { contentType: 'text/plain', ttlSeconds: null, expiresAt: null, closed: false };
  const b = (s: string): Buffer => Buffer.from(s);
  const append = (entries: string[]) => ({
    contentType: 'text/plain',
    streamSeq: null,
    producer: null,
    close: false,
    entries: entries.map(b),
  });

  it('is the same array while the tail stands still, and the new messages once it moved', async () => {
    const store = factory();
    await store.create('s', text, ['a', 'b', 'c'].map(b));
    const first = await store.read('s', 0, 100, 1 << 20);
    const again = await store.read('s', 0, 100, 1 << 20);
    // The same array: the surface keeps the body it built from it beside it (general-read.ts).
    expect(again!.entries).toBe(first!.entries);
    expect((await store.read('s', 1, 100, 1 << 20))!.entries.map(String)).toEqual(['b', 'c']);
    expect((await store.read('s', 0, 2, 1 << 20))!.entries.map(String)).toEqual(['a', 'b']);
    expect((await store.append('s', append(['d']))).kind).toBe('appended');
    const moved = await store.read('s', 0, 100, 1 << 20);
    expect(moved!.entries).not.toBe(first!.entries);
    expect(moved!.entries.map(String)).toEqual(['a', 'b', 'c', 'd']);
    expect(first!.entries.map(String)).toEqual(['a', 'b', 'c']);
    // Deleted and created again: the new stream's messages, never the old page.
    await store.delete('s');
    await store.create('s', text, ['x'].map(b));
    expect((await store.read('s', 0, 100, 1 << 20))!.entries.map(String)).toEqual(['x']);
  });
});
