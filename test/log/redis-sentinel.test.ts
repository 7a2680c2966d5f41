/**
 * The store through Redis Sentinel (one master, one replica, one sentinel, all real, on loopback):
 * the whole store contract, then a real failover: the master SIGKILLed with records it acknowledged
 * that never reached the replica, the sentinel promoting the replica, and the writer appending again
 * through the new master. The rollback becomes a new epoch: offsets never go down, none is reused.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { LogWriter } from '../../src/log/log-writer.js';
import type { LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { RetentionPolicy } from '../../src/log/store.js';
import { redisServerAvailable } from '../support/redis-server.js';
import { startRedisSentinel, type RedisSentinelProcess } from '../support/redis-sentinel.js';
import { uniqueCapsule } from '../support/redis.js';
import { frame, readAll, runStoreContract } from './store.contract.js';

const available = redisServerAvailable();
const skip = !available && process.env.REQUIRE_REDIS !== '1';
if (skip)
  console.warn('redis-server not found: Redis Sentinel tests skipped (REQUIRE_REDIS=1 fails instead)');

let sentinel: RedisSentinelProcess | null = null;
const stores: RedisStore[] = [];
const open = (retention?: RetentionPolicy): RedisStore => {
  if (!sentinel) throw new Error('REQUIRE_REDIS=1 but redis-server is not installed');
  const store = new RedisStore(sentinel.config, { retention });
  stores.push(store);
  return store;
};

beforeAll(async () => {
  if (available) sentinel = await startRedisSentinel();
}, 30_000);
afterAll(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await sentinel?.stop();
});

runStoreContract('redis sentinel', (retention) => open(retention), skip);

describe.skipIf(skip)('RedisStore through Sentinel', () => {
  const label = (r: LogRecord): string =>
    r.kind === 'frame'
      ? (r.upstreamId ?? '')
      : r.kind === 'fact' && 'reason' in r
        ? `fact:${r.reason}`
        : r.kind;
  const labels = (prefix: string, n: number): string[] =>
    Array.from({ length: n }, (_, i) => `${prefix}${i}`);

  it('fails over on a SIGKILLed master: the lost tail becomes a new epoch, the writer appends on', async () => {
    const s = sentinel!;
    const store = open();
    const writer = new LogWriter(store, { retryBaseMs: 20, retryMaxMs: 200, trimIntervalMs: 0 });
    const replica = new Redis(s.replicaPort, '127.0.0.1', { maxRetriesPerRequest: 0 });
    replica.on('error', () => {});
    const cap = uniqueCapsule('failover');
    const { log } = store.keys(cap);
    const resets: string[] = [];
    writer.onReset((c) => resets.push(c));
    /** Every acknowledged append, in the order the entries were handed to the writer. */
    const acked: { label: string; offset: number }[] = [];
    const submit = async (l: string): Promise<number | GatewayError> => {
      const at = acked.length;
      acked.push({ label: l, offset: -1 });
      try {
        const { offset } = await writer.append(cap, frame(l));
        acked[at]!.offset = offset;
        return offset;
      } catch (err) {
        if (err instanceof GatewayError) return err;
        throw err;
      }
    };
    try {
      // A: durable on the master and, once the replica has them, on both.
      const a = await Promise.all(labels('a', 10).map(submit));
      for (let i = 0; (await replica.xlen(log)) < a.length; i++) {
        if (i > 200) throw new Error('replica never caught up');
        await new Promise((r) => setTimeout(r, 10)); // replication has no event to wait on
      }
      const epochBefore = (await store.position(cap)).epoch;
      // B: acknowledged by the master only. CLIENT PAUSE WRITE on the replica also holds back the
      // replication stream; the master dies before the replica applies it: an async-replica loss.
      await replica.client('PAUSE', 2500, 'WRITE');
      const b = (await Promise.all(labels('b', 10).map(submit))) as number[];
      await s.killMaster();
      // C: handed to the writer while there is no master: queued, retried.
      const c = labels('c', 10).map(submit);
      const fact = writer.append(cap, {
        kind: 'fact',
        fact: 'upstream-lost',
        reason: 'c-fact',
        receivedAt: 1,
      });
      expect(await s.waitForNewMaster(s.masterPort, 20_000)).toBe(s.replicaPort);
      const factAt = await fact;
      const cResults = await Promise.all(c);
      const d = (await Promise.all(labels('d', 10).map(submit))) as number[];

      // The promoted replica's counter was below what the writer saw durable (B): a new epoch whose
      // first record is the reset fact; the frames queued meanwhile were discarded (the capsule's
      // replay re-delivers them), the fact queued with them was kept.
      expect(resets).toEqual([cap]);
      for (const r of cResults) expect(r instanceof GatewayError && r.details?.discarded).toBe(true);
      const records = await readAll(store, cap);
      expect(records.map(label)).toEqual([
        ...labels('a', 10),
        'fact:store-reset',
        'fact:c-fact',
        ...labels('d', 10),
      ]);
      const position = await store.position(cap);
      expect(position.epoch).not.toBe(epochBefore);
      const resetAt = records[10]!.offset;
      expect(resetAt).toBeGreaterThan(Math.max(...b));
      expect(factAt.offset).toBeGreaterThan(resetAt);
      // Offsets never go down, in the order entries were handed over, and none is reused: every
      // acknowledged offset holds what was acknowledged there, or nothing (B, lost with the master).
      const handed = acked.filter((x) => x.offset > 0).map((x) => x.offset);
      expect(handed).toEqual([...handed].sort((x, y) => x - y));
      expect(new Set(handed).size).toBe(handed.length);
      const byOffset = new Map(records.map((r) => [r.offset, label(r)]));
      for (const x of acked.filter((y) => y.offset > 0)) {
        if (x.label.startsWith('b')) expect(byOffset.has(x.offset)).toBe(false);
        else expect(byOffset.get(x.offset)).toBe(x.label);
      }
      expect(Math.min(...d)).toBeGreaterThan(factAt.offset);
      // And it all lives on the promoted replica, now a master.
      expect(((await replica.role()) as string[])[0]).toBe('master');
      expect(await replica.xlen(log)).toBe(records.length);
    } finally {
      await writer.close();
      replica.disconnect();
    }
  });
});
