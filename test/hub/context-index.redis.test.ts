/**
 * Per-context reads on Redis: the same checks as on memory (whole, paged, growing with a live tail,
 * trimmed, a new epoch), and across replicas: a record acknowledged through one gateway core is in
 * the next readContext through another core on the same Redis, whose index was already warm.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayCoreImpl, type UpstreamPort } from '../../src/core/gateway-core.js';
import { Hub } from '../../src/hub/hub.js';
import { LogWriter } from '../../src/log/log-writer.js';
import type { SubmissionEntry } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { RetentionPolicy } from '../../src/log/store.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { checkContexts } from './context-check.js';
import { buildLog, recordTasks, type RecordedTask } from './context-workload.js';
import { collect } from './helpers.js';

const url = testRedisUrl();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

let tasks: RecordedTask[] = [];
beforeAll(async () => {
  if (url) tasks = await recordTasks();
}, 60_000);

const setup = (prefix: string, retention?: RetentionPolicy): { store: RedisStore; hub: Hub } => {
  const store = new RedisStore(url!, { keyPrefix: prefix, ...(retention ? { retention } : {}) });
  const hub = new Hub(store, { pageSize: 37, dissolveMs: 60_000, tailWaitMs: 500 });
  cleanups.push(async () => {
    await hub.close();
    await store.close();
  });
  return { store, hub };
};

const prefix = (): string => `ctx-${randomUUID().slice(0, 8)}`;

describe.skipIf(!url)('readContext on Redis', () => {
  it('answers each context as a whole read attributes it, whole, paged and as the log grows', async () => {
    const { store, hub } = setup(prefix());
    const capsule = uniqueCapsule();
    const log = buildLog(tasks, 11);
    const half = Math.floor(log.length / 2);
    for (let i = 0; i < half; i += 20) await store.append(capsule, log.slice(i, i + 20));
    await checkContexts(hub, store, capsule, { exact: true });
    const keep = collect(hub, capsule, { after: (await store.position(capsule)).head });
    for (let i = half; i < log.length; i += 13) {
      await store.append(capsule, log.slice(i, i + 13));
      if (i % 2 === 0) await checkContexts(hub, store, capsule, { exact: true });
    }
    await checkContexts(hub, store, capsule, { exact: true, limit: 6 });
    await checkContexts(hub, store, capsule, { exact: true, limit: 2, afterFraction: 0.7 });
    keep.sub.close();
  });

  it('keeps every retained record of a context under count retention', async () => {
    const { store, hub } = setup(prefix(), { maxRecords: 50, maxAgeMs: 0 });
    const capsule = uniqueCapsule();
    const log = buildLog(tasks, 12);
    for (let i = 0; i < log.length; i += 10) {
      await store.append(capsule, log.slice(i, i + 10));
      if (i % 30 === 0) await checkContexts(hub, store, capsule, { exact: false });
    }
    await checkContexts(hub, store, capsule, { exact: false, limit: 5 });
  });

  it('rebuilds for a new epoch', async () => {
    const { store, hub } = setup(prefix());
    const capsule = uniqueCapsule();
    const log = buildLog(tasks, 13);
    const half = Math.floor(log.length / 2);
    await store.append(capsule, log.slice(0, half));
    await checkContexts(hub, store, capsule, { exact: true });
    const before = await store.position(capsule);
    expect((await store.append(capsule, [], { floor: before.head + 1_000 })).reset).toBe(true);
    await store.append(capsule, log.slice(half));
    expect((await store.position(capsule)).epoch).not.toBe(before.epoch);
    await checkContexts(hub, store, capsule, { exact: true });
  });

  it('reads through one core what was acknowledged through another core right before', async () => {
    const shared = prefix();
    const capsule = uniqueCapsule();
    const upstream: UpstreamPort = {
      url: 'http://127.0.0.1:9/',
      state: () => ({ state: 'stopped', lastFrameAt: null, reconnects: 0, ack: null }),
      submit: () => Promise.reject(new Error('not used')),
      cancel: () => Promise.reject(new Error('not used')),
      forward: () => Promise.reject(new Error('not used')),
    };
    const core = (): GatewayCoreImpl => {
      const { store, hub } = setup(shared);
      const writer = new LogWriter(store);
      cleanups.push(() => writer.close());
      return new GatewayCoreImpl({
        hub,
        writer,
        upstreams: new Map([[capsule, upstream]]),
        shutdownSignal: new AbortController().signal,
      });
    };
    const [a, b] = [core(), core()];
    const entry = (contextId: string, n: number): SubmissionEntry => ({
      kind: 'submission',
      protocol: 'flue',
      owner: null,
      contextId,
      messageId: `m-${n}`,
      text: `turn ${n}`,
      receivedAt: Date.now(),
    });
    // B's index is warm (built, and its tail loop running) before A writes anything more.
    await a.append(capsule, entry('x', 0));
    expect((await b.readContext(capsule, 'x', 0, 100)).records).toHaveLength(1);
    const keep = b.subscribe(capsule, { after: 0, onRecords: () => undefined, onEnd: () => undefined });
    cleanups.push(async () => keep.close());
    for (let n = 1; n <= 20; n++) {
      const writer = n % 3 === 0 ? b : a;
      const reader = writer === a ? b : a;
      const at = await writer.append(capsule, entry(n % 2 ? 'x' : 'y', n));
      const page = await reader.readContext(capsule, n % 2 ? 'x' : 'y', at.offset - 1, 100);
      expect(page.records.map((r) => r.offset)).toEqual([at.offset]);
      expect(page.next).toBeGreaterThanOrEqual(at.offset);
      // And nothing of the other context.
      const other = await reader.readContext(capsule, n % 2 ? 'y' : 'x', at.offset - 1, 100);
      expect(other.records).toEqual([]);
    }
  });
});
