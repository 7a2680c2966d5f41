/** The read cache of general-stream messages (message-cache.ts): exact pages, epochs, the byte budget. */
import { describe, expect, it } from 'vitest';
import { MESSAGE_OVERHEAD, MessageCache } from '../../src/streams/message-cache.js';

const b = (s: string): Buffer => Buffer.from(s);
const strings = (page: Buffer[] | null): string[] | null => page?.map(String) ?? null;

describe('MessageCache', () => {
  it('answers a page only when every message of it is held, cut at the byte bound as a store cuts it', () => {
    const cache = new MessageCache(1 << 20);
    cache.put('s', 7, 1, ['a', 'bb', 'ccc', 'dddd'].map(b));
    expect(strings(cache.page('s', 7, 0, 4, 1 << 20))).toEqual(['a', 'bb', 'ccc', 'dddd']);
    expect(strings(cache.page('s', 7, 1, 2, 1 << 20))).toEqual(['bb', 'ccc']);
    // At most maxBytes, but always one message, however large.
    expect(strings(cache.page('s', 7, 0, 4, 6))).toEqual(['a', 'bb', 'ccc']);
    expect(strings(cache.page('s', 7, 0, 4, 5))).toEqual(['a', 'bb']);
    expect(strings(cache.page('s', 7, 3, 1, 1))).toEqual(['dddd']);
    expect(strings(cache.page('s', 7, 2, 2, 1))).toEqual(['ccc']);
    // A page reaching past what is held is no answer at all, never a shorter page.
    expect(cache.page('s', 7, 2, 3, 1 << 20)).toBeNull();
    expect(cache.page('s', 7, 0, 4, 1 << 20)).not.toBeNull();
    expect(cache.page('other', 7, 0, 1, 1 << 20)).toBeNull();
    expect([cache.has('s', 7, 4), cache.has('s', 7, 5), cache.has('s', 8, 1)]).toEqual([true, false, false]);
  });

  it('keeps copies: the buffers handed in may change or be views of larger ones', () => {
    const cache = new MessageCache(1 << 20);
    const body = b('xxhelloworldyy');
    const entries = [body.subarray(2, 7), body.subarray(7, 12)];
    cache.put('s', 1, 1, entries);
    body.fill(0x2e);
    const page = cache.page('s', 1, 0, 2, 1 << 20)!;
    expect(strings(page)).toEqual(['hello', 'world']);
    // Held apart from the body, not as views of it.
    expect(page[0]!.buffer).not.toBe(body.buffer);
    expect(cache.bytes).toBe(10 + 2 * MESSAGE_OVERHEAD);
  });

  it('holds one epoch of a stream: another one, a drop, drops its messages', () => {
    const cache = new MessageCache(1 << 20);
    cache.put('s', 1, 1, [b('old')]);
    cache.put('t', 1, 1, [b('other')]);
    cache.put('s', 2, 1, [b('new')]);
    expect(cache.page('s', 1, 0, 1, 100)).toBeNull();
    expect(strings(cache.page('s', 2, 0, 1, 100))).toEqual(['new']);
    cache.epochIs('s', 3);
    expect(cache.has('s', 2, 1)).toBe(false);
    expect(strings(cache.page('t', 1, 0, 1, 100))).toEqual(['other']);
    cache.drop('t');
    expect(cache.page('t', 1, 0, 1, 100)).toBeNull();
    expect(cache.bytes).toBe(0);
  });

  it('stays within its budget, the oldest put going first; a message held twice stays with its first put', () => {
    const per = 100 + MESSAGE_OVERHEAD;
    const cache = new MessageCache(5 * per);
    const m = (i: number): Buffer => Buffer.alloc(100, 48 + i);
    cache.put('s', 1, 1, [m(1), m(2), m(3)]);
    // Positions 2 and 3 are held already: only 4 and 5 are new, and only they are counted again.
    cache.put('s', 1, 2, [m(2), m(3), m(4), m(5)]);
    expect(cache.bytes).toBe(5 * per);
    expect(cache.page('s', 1, 0, 5, 1 << 20)).toEqual([m(1), m(2), m(3), m(4), m(5)]);
    // One more: the first put (positions 1–3) goes whole; 4 and 5 stay.
    cache.put('t', 1, 1, [m(9)]);
    expect(cache.bytes).toBe(3 * per);
    expect(cache.has('s', 1, 3)).toBe(false);
    expect(cache.page('s', 1, 3, 2, 1 << 20)).toEqual([m(4), m(5)]);
    // Larger than the whole budget: not kept, and nothing else evicted for it.
    cache.put('u', 1, 1, [Buffer.alloc(5 * per)]);
    expect(cache.has('u', 1, 1)).toBe(false);
    expect(cache.bytes).toBe(3 * per);
    for (let i = 0; i < 50; i++) {
      cache.put(`many${i % 7}`, 1, i, [m(i % 10), m((i + 1) % 10)]);
      expect(cache.bytes).toBeLessThanOrEqual(5 * per);
    }
  });

  it('hands a page asked for again out as one array, counted once more, and gone with its messages', () => {
    const per = 100 + MESSAGE_OVERHEAD;
    const cache = new MessageCache(10 * per);
    const m = (i: number): Buffer => Buffer.alloc(100, 48 + i);
    cache.put('s', 1, 1, [m(1), m(2), m(3)]);
    cache.put('s', 1, 4, [m(4)]);
    const first = cache.page('s', 1, 0, 4, 1 << 20)!;
    expect(cache.bytes).toBe(4 * per);
    // Asked again (by other bounds that cut the same messages too): kept, and the same array from then on.
    const second = cache.page('s', 1, 0, 4, 400)!;
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
    expect(cache.page('s', 1, 0, 4, 1 << 20)).toBe(second);
    const kept = 4 * per + 400 + 256;
    expect(cache.bytes).toBe(kept);
    // Another page of other messages is another array.
    expect(cache.page('s', 1, 0, 3, 1 << 20)).not.toBe(second);
    // The oldest chunk (positions 1–3) evicted: the kept page goes with it, the budget holds.
    cache.put('t', 1, 1, [m(5), m(6), m(7), m(8), m(9)]);
    expect(cache.bytes).toBeLessThanOrEqual(10 * per);
    expect(cache.page('s', 1, 0, 4, 1 << 20)).toBeNull();
    expect(cache.page('s', 1, 3, 1, 1 << 20)).toEqual([m(4)]);
    // A drop takes the kept pages too.
    cache.page('t', 1, 0, 5, 1 << 20);
    cache.page('t', 1, 0, 5, 1 << 20);
    cache.drop('t');
    cache.drop('s');
    expect(cache.bytes).toBe(0);
  });

  it('holds nothing with a budget of 0', () => {
    const cache = new MessageCache(0);
    cache.put('s', 1, 1, [b('a')]);
    expect([cache.bytes, cache.has('s', 1, 1), cache.page('s', 1, 0, 1, 10)]).toEqual([0, false, null]);
  });
});
