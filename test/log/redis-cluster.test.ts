/**
 * The store on a real 3-master Redis Cluster (loopback, started here): the whole store contract, then
 * what only a Cluster has: capsules spread over the masters, every key of a capsule in one slot
 * (scripts never cross slots), blocking reads on the node owning the slot, and a slot that moves to
 * another master while a reader is blocked on it.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keySlot } from '../../src/log/redis-connection.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { RetentionPolicy } from '../../src/log/store.js';
import { redisCliAvailable, startRedisCluster, type RedisClusterProcess } from '../support/redis-cluster.js';
import { uniqueCapsule } from '../support/redis.js';
import { frame, runStoreContract } from './store.contract.js';

const available = redisCliAvailable();
const skip = !available && process.env.REQUIRE_REDIS !== '1';
if (skip)
  console.warn(
    'redis-server/redis-cli not found: Redis Cluster tests skipped (REQUIRE_REDIS=1 fails instead)',
  );

let cluster: RedisClusterProcess | null = null;
const stores: RedisStore[] = [];
const open = (retention?: RetentionPolicy): RedisStore => {
  if (!cluster) throw new Error('REQUIRE_REDIS=1 but redis-server/redis-cli are not installed');
  const store = new RedisStore({ cluster: cluster.urls }, { retention });
  stores.push(store);
  return store;
};

beforeAll(async () => {
  if (available) cluster = await startRedisCluster();
}, 30_000);
afterAll(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await cluster?.stop();
});

runStoreContract('redis cluster', (retention) => open(retention), skip);

describe.skipIf(skip)('RedisStore on a Redis Cluster', () => {
  /** One capsule per master: ids drawn until each master owns one's slot. */
  const capsulePerMaster = (): Map<string, string> => {
    const byOwner = new Map<string, string>();
    for (let i = 0; i < 1000 && byOwner.size < 3; i++) {
      const cap = uniqueCapsule('spread');
      const owner = cluster!.ownerOf(keySlot(`mg:{${cap}}:log`));
      if (!byOwner.has(owner)) byOwner.set(owner, cap);
    }
    expect(byOwner.size).toBe(3);
    return byOwner;
  };

  it('the contract run above left data on at least two masters', async () => {
    const held = [...(await cluster!.keysPerNode()).values()].filter((n) => n > 0);
    expect(held.length).toBeGreaterThanOrEqual(2);
  });

  it('keeps every key of a capsule in one slot, as the cluster computes it', async () => {
    const store = open();
    const cap = uniqueCapsule();
    const { log, meta } = store.keys(cap);
    const dedup = store.dedupKey(cap, 'writer-1');
    const node = new Redis(cluster!.ports[0]!, '127.0.0.1');
    try {
      const slots = await Promise.all([log, meta, dedup].map((k) => node.cluster('KEYSLOT', k)));
      expect(new Set(slots).size).toBe(1);
      expect(slots[0]).toBe(keySlot(log));
    } finally {
      node.disconnect();
    }
  });

  it('appends, reads and wakes blocked readers on capsules owned by each of the three masters', async () => {
    const store = open();
    const caps = [...capsulePerMaster().values()];
    const before = await cluster!.keysPerNode();
    // A waiter per capsule, each blocked on its own master, then one append each wakes them.
    const positions = await Promise.all(caps.map((c) => store.position(c)));
    const waits = caps.map((c, i) => store.waitAfter(c, positions[i]!.head, 10, 10_000));
    const appended = await Promise.all(
      caps.map((c) =>
        store.append(c, [frame(`${c}-a`), frame(`${c}-b`)], { batch: { writerId: 'w', seq: 1 } }),
      ),
    );
    const woke = await Promise.all(waits);
    woke.forEach((r, i) => expect(r.records[0]?.offset).toBe(appended[i]!.offsets[0]));
    for (const [i, c] of caps.entries()) {
      const { records } = await store.read(c, 0, 10);
      expect(records.map((r) => r.kind === 'frame' && r.upstreamId)).toEqual([`${c}-a`, `${c}-b`]);
      // The batch id's dedup key lives on the same master: a retry answers as the first time.
      const retry = await store.append(c, [frame('again')], { batch: { writerId: 'w', seq: 1 } });
      expect(retry.appliedOffsets).toEqual(appended[i]!.offsets);
    }
    const after = await cluster!.keysPerNode();
    for (const port of cluster!.ports) expect(after.get(port)!).toBeGreaterThan(before.get(port)!);
  });

  it('a reader blocked on a slot that moves to another master keeps waiting there and wakes', async () => {
    const store = open();
    const cap = uniqueCapsule('moving');
    const { log } = store.keys(cap);
    const slot = keySlot(log);
    await store.append(cap, [frame('before')]);
    const srcPort = Number(cluster!.ownerOf(slot).split(':')[1]);
    const dstPort = cluster!.ports.find((p) => p !== srcPort)!;
    const node = (port: number): Redis => new Redis(port, '127.0.0.1');
    const [src, dst, ...others] = [
      srcPort,
      dstPort,
      ...cluster!.ports.filter((p) => p !== srcPort && p !== dstPort),
    ].map(node);
    /** Poll a node's client list for a client blocked (flag b) in XREAD (no event for it; bounded). */
    const blockedOn = async (n: Redis, want: boolean): Promise<void> => {
      for (let i = 0; i < 200; i++) {
        const lines = ((await n.client('LIST')) as string).split('\n');
        const blocked = lines.some((l) => /\bflags=\w*b/.test(l) && /\bcmd=xread\b/.test(l));
        if (blocked === want) return;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`xread ${want ? 'never blocked' : 'still blocked'} on that node`);
    };
    try {
      const { head } = await store.position(cap);
      const waiting = store.waitAfter(cap, head, 10, 15_000);
      await blockedOn(src!, true);
      // Move the slot with its keys, as `redis-cli --cluster reshard` does.
      const [srcId, dstId] = (await Promise.all([src!.cluster('MYID'), dst!.cluster('MYID')])) as string[];
      await dst!.cluster('SETSLOT', slot, 'IMPORTING', srcId!);
      await src!.cluster('SETSLOT', slot, 'MIGRATING', dstId!);
      const keys = (await src!.cluster('GETKEYSINSLOT', slot, 100)) as string[];
      await src!.migrate('127.0.0.1', dstPort, '', 0, 5000, 'KEYS', ...keys);
      for (const n of [dst!, src!, ...others]) await n.cluster('SETSLOT', slot, 'NODE', dstId!);
      // The old owner turns the blocked reader away (MOVED); it blocks again on the new owner.
      await blockedOn(src!, false);
      await blockedOn(dst!, true);
      const appended = await store.append(cap, [frame('after')]);
      const woke = await waiting;
      expect(woke.records.map((r) => r.offset)).toEqual(appended.offsets);
      expect(await dst!.exists(log)).toBe(1);
    } finally {
      for (const n of [src!, dst!, ...others]) n.disconnect();
    }
  });
});
