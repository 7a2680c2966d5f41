/**
 * A new epoch whose offsets continue above everything handed out (a store that lost records, fenced
 * by the writer's floor) is not a reason to end listeners: a live subscriber, a parked waiter and a
 * reader from an old cursor all meet the store-reset fact first, then the new epoch's records, and
 * the channel's memory never serves an old-epoch record under the new epoch.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Hub } from '../../src/hub/hub.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { storeResetFact } from '../../src/log/store.js';
import type { LogRecord } from '../../src/log/record.js';
import { uniqueCapsule } from '../support/redis.js';
import { collect, frames } from './helpers.js';

const hubs: Hub[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

const isReset = (r: LogRecord | undefined): boolean =>
  r?.kind === 'fact' && r.fact === 'frames-possibly-missing' && r.reason === 'store-reset';

describe('a new epoch above every old offset', () => {
  it('reaches live subscribers, parked waiters and old cursors as the store-reset fact, in order', async () => {
    const store = new MemoryStore();
    const hub = new Hub(store, { dissolveMs: 10, tailWaitMs: 5_000 });
    hubs.push(hub);
    const capsule = uniqueCapsule();
    const old = (await store.append(capsule, frames(0, 5))).offsets;
    const oldHead = old[old.length - 1]!;
    const sub = collect(hub, capsule, { after: old[0]! - 1 });
    await sub.until(oldHead);
    const parked = hub.waitAfter(capsule, oldHead, 100, 10_000);
    await vi.waitFor(() => expect(hub.capsuleStats(capsule).waiters).toBe(1));

    // A writer whose floor is above the store's head: the store regressed; a new epoch starts.
    const before = await store.position(capsule);
    const reset = await store.append(capsule, frames(5, 2), {
      floor: oldHead + 10,
      resetFact: storeResetFact(),
    });
    expect(reset.epoch).not.toBe(before.epoch);
    const [resetAt] = reset.offsets;
    expect(resetAt).toBeGreaterThan(oldHead + 1);
    const next = (await store.append(capsule, frames(5, 2))).offsets;

    await sub.until(next[1]!);
    expect(sub.endReason).toBeNull();
    const after = sub.records.filter((r) => r.offset > oldHead);
    expect(isReset(after[0])).toBe(true);
    expect(after.map((r) => r.offset)).toEqual([resetAt, ...next]);
    expect(sub.records.map((r) => r.offset)).toEqual([...old, resetAt, ...next]);

    const woke = await parked;
    expect(isReset(woke.records[0])).toBe(true);
    expect(woke.position.epoch).toBe(reset.epoch);

    // A reader from an old cursor (memory or store alike) gets the new epoch's records only.
    const page = await hub.read(capsule, oldHead, 100);
    expect(page.records.map((r) => r.offset)).toEqual([resetAt, ...next]);
    expect(page.position.epoch).toBe(reset.epoch);
    const mid = await hub.read(capsule, old[1]!, 100);
    expect(mid.records.map((r) => r.offset)).toEqual([...old.slice(2), resetAt, ...next]);
    expect(await hub.cursorStatus(capsule, oldHead)).toMatchObject({ status: 'ok' });
    sub.sub.close();
  });
});
