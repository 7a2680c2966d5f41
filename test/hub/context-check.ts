/** The per-context read checks shared by the context-index tests: readContext against a whole read. */
import { expect } from 'vitest';
import type { LogRecord } from '../../src/log/record.js';
import type { LogStore } from '../../src/log/store.js';
import type { HubReadSide } from '../../src/hub/hub.js';
import { attribute, contextsOf } from './context-workload.js';

type Reader = Pick<HubReadSide, 'readContext'>;

/** Page through one context with `limit`, resuming from each answer's `next`. */
export const pageThrough = async (
  hub: Reader,
  capsule: string,
  contextId: string,
  after: number,
  limit: number,
): Promise<LogRecord[]> => {
  const out: LogRecord[] = [];
  for (let cursor = after; ;) {
    const page = await hub.readContext(capsule, contextId, cursor, limit);
    expect(page.next).toBeGreaterThanOrEqual(cursor);
    out.push(...page.records);
    if (page.records.length < limit) return out;
    // Cut short by `limit`: complete through its last record (or further, when nothing else remains).
    expect(page.next).toBeGreaterThanOrEqual(page.records[page.records.length - 1]!.offset);
    cursor = page.next;
  }
};

/**
 * For every context of the log (and one it never names), readContext returns exactly what a
 * whole-capsule read attributes to it or to no context (`exact`), or, when retention trimmed what the
 * index learnt links from, at least the context's own records and every fact, and only real records.
 */
export const checkContexts = async (
  hub: Reader,
  store: LogStore,
  capsule: string,
  options: { exact: boolean; limit?: number; afterFraction?: number },
): Promise<void> => {
  const { records: whole, position } = await store.read(capsule, 0, 1_000_000);
  const attr = attribute(whole);
  const byOffset = new Map(whole.map((r) => [r.offset, r]));
  const start = whole[Math.floor(whole.length * (options.afterFraction ?? 0))]?.offset ?? 0;
  const after = options.afterFraction ? start - 1 : 0;
  for (const contextId of contextsOf(whole)) {
    const got =
      options.limit !== undefined
        ? await pageThrough(hub, capsule, contextId, after, options.limit)
        : (await hub.readContext(capsule, contextId, after, 1_000_000)).records;
    const offsets = got.map((r) => r.offset);
    expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
    expect(new Set(offsets).size).toBe(offsets.length);
    for (const r of got) expect(r).toEqual(byOffset.get(r.offset));
    const later = whole.filter((r) => r.offset > after);
    const exact = later.filter((r) => [contextId, null].includes(attr.get(r.offset) ?? null));
    if (options.exact) {
      expect(offsets, contextId).toEqual(exact.map((r) => r.offset));
    } else {
      const own = later.filter((r) => attr.get(r.offset) === contextId || r.kind === 'fact');
      const have = new Set(offsets);
      expect(
        own.filter((r) => !have.has(r.offset)).map((r) => r.offset),
        contextId,
      ).toEqual([]);
    }
  }
  const page = await hub.readContext(capsule, 'ctx-nobody', 0, 1);
  if (page.records.length === 0) expect(page.next).toBeGreaterThanOrEqual(position.head);
};
