/**
 * The channel's record memory on its own: runs merge when they touch, an offset already held keeps
 * its object, the bound drops the lowest offsets, and a page asked again is the same array.
 */
import { describe, expect, it } from 'vitest';
import { RecordMemory } from '../../src/hub/record-memory.js';
import type { LogRecord } from '../../src/log/record.js';

const recs = (from: number, count: number, tag = 'a'): LogRecord[] =>
  Array.from({ length: count }, (_, i) => ({
    offset: from + i,
    kind: 'frame',
    event: 'text',
    upstreamId: null,
    data: tag,
    receivedAt: 0,
  }));

const dataOf = (record: LogRecord | undefined): string | undefined =>
  record?.kind === 'frame' ? record.data : undefined;

const offsets = (records: readonly LogRecord[] | null): number[] => (records ?? []).map((r) => r.offset);

describe('record memory', () => {
  it('merges touching runs, keeping the objects it held', () => {
    const memory = new RecordMemory(1000);
    const tail = recs(200, 10, 'tail');
    memory.append(tail); // 200..209
    memory.absorb(recs(100, 50)); // 100..149: apart
    expect(memory.runCount).toBe(2);
    memory.absorb(recs(150, 50)); // 150..199 joins both
    expect(memory.runCount).toBe(1);
    expect(memory.size).toBe(110);
    memory.absorb(recs(195, 10, 'again')); // held already: the old objects stay
    expect(memory.slice(200, 1)![0]).toBe(tail[0]);
    expect(offsets(memory.slice(100, 500))).toEqual(Array.from({ length: 110 }, (_, k) => 100 + k));
    memory.absorb(recs(90, 20, 'over')); // overlaps the start: 90..99 added, 100.. kept
    expect(dataOf(memory.slice(100, 1)![0])).toBe('a');
    expect(dataOf(memory.slice(90, 1)![0])).toBe('over');
    expect(memory.size).toBe(120);
  });

  it('extends a run read upwards in place and drops the lowest offsets past the bound', () => {
    const memory = new RecordMemory(100);
    for (let from = 1; from < 400; from += 50) memory.absorb(recs(from, 50));
    expect(memory.runCount).toBe(1);
    expect(memory.size).toBe(100);
    expect(memory.slice(300, 10)).toBeNull();
    expect(offsets(memory.slice(301, 1000))).toEqual(Array.from({ length: 100 }, (_, k) => 301 + k));
    memory.append(recs(401, 30));
    expect(memory.size).toBe(100);
    expect(offsets(memory.slice(331, 1))).toEqual([331]);
    expect(memory.slice(330, 1)).toBeNull();
  });

  it('a tail batch that jumps starts a new run; one that spans a new epoch keeps what follows', () => {
    const memory = new RecordMemory(100);
    memory.append(recs(1, 10));
    memory.append(recs(20, 5)); // trimmed before the tail read 11..19
    expect(memory.runCount).toBe(2);
    expect(memory.slice(11, 1)).toBeNull();
    memory.append([...recs(25, 3), ...recs(1000, 2)]); // offsets jump inside: another epoch
    expect(memory.runCount).toBe(1);
    expect(offsets(memory.slice(1000, 10))).toEqual([1000, 1001]);
    expect(memory.slice(25, 1)).toBeNull();
  });

  it('hands out one array per page until the page would differ', () => {
    const memory = new RecordMemory(1000);
    memory.append(recs(1, 10));
    const page = memory.slice(3, 100);
    expect(memory.slice(3, 100)).toBe(page);
    memory.append(recs(11, 5));
    const longer = memory.slice(3, 100);
    expect(longer).not.toBe(page);
    expect(offsets(longer)).toEqual(Array.from({ length: 13 }, (_, k) => 3 + k));
    memory.clear();
    expect(memory.slice(3, 100)).toBeNull();
  });
});
