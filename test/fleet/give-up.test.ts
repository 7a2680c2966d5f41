/**
 * An owner that cannot reach its capsule gives it up (it may be the only one cut off: a partition
 * cuts paths, not capsules): two replicas' ownership on real Redis, the watch's reachability standing
 * in through the ingestion interface. The owner stops before it releases (never two watchers), the
 * other takes the capsule at once (the release says why), and the giver keeps away for its cooldown.
 * A lone replica keeps what it cannot reach: nobody else could take it. End to end, with a real
 * cut: test/fleet/partitions.test.ts.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { FleetOwnership } from '../../src/fleet/ownership.js';
import type { IngestionControl } from '../../src/fleet/types.js';
import { testRedisUrl } from '../support/redis.js';

const redisUrl = testRedisUrl();

interface Side {
  ownership: FleetOwnership;
  redis: Redis;
  /** Ingestion events, in order, with the time they happened. */
  events: { kind: 'start' | 'stop'; at: number }[];
  /** What the watch reports: unreachable since this time (null: reaching the capsule). */
  cutSince: number | null;
}

const until = async (what: string, probe: () => boolean, timeoutMs = 10_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe.skipIf(!redisUrl)('an owner cut from its capsule', () => {
  const sides: Side[] = [];
  let prefix = '';

  beforeAll(() => {
    prefix = `gu-${randomUUID().slice(0, 8)}`;
  });

  afterEach(async () => {
    await Promise.all(sides.map((s) => s.ownership.close()));
    for (const s of sides.splice(0)) s.redis.disconnect();
  });

  const side = (replicaId: string, capsule: string): Side => {
    const redis = new Redis(redisUrl!);
    const s: Side = { ownership: null as unknown as FleetOwnership, redis, events: [], cutSince: null };
    const control: IngestionControl = {
      start: () => void s.events.push({ kind: 'start', at: Date.now() }),
      stop: async () => void s.events.push({ kind: 'stop', at: Date.now() }),
      flush: async () => undefined,
      unreachableFor: () => (s.cutSince === null ? 0 : Date.now() - s.cutSince),
    };
    s.ownership = new FleetOwnership({
      client: redis,
      replicaId,
      ttlMs: 6000,
      renewMs: 200,
      keyPrefix: prefix,
      control,
      giveUpAfterMs: 300,
      giveUpCooldownMs: 60_000,
    });
    s.ownership.setCapsules([capsule]);
    s.ownership.start();
    sides.push(s);
    return s;
  };

  it('hands it over to a replica that can reach it: stopped before the other starts, taken at once', async () => {
    const capsule = `c-${randomUUID().slice(0, 8)}`;
    const a = side('a', capsule);
    const b = side('b', capsule);
    await until('one owner', () => a.ownership.owns(capsule) !== b.ownership.owns(capsule));
    // Both replicas are in the live set before the owner is cut off.
    await new Promise((r) => setTimeout(r, 500));
    const [owner, other] = a.ownership.owns(capsule) ? [a, b] : [b, a];
    owner.cutSince = Date.now();
    await until('the other replica ingesting', () => other.ownership.owns(capsule));
    expect(owner.ownership.owns(capsule)).toBe(false);
    const stopped = owner.events.filter((e) => e.kind === 'stop').at(-1)!;
    const started = other.events.filter((e) => e.kind === 'start').at(-1)!;
    expect(stopped.at).toBeLessThanOrEqual(started.at);
    // Taken on the release's word: without it the other replica would wait for the lease to stay
    // free a whole TTL (6 s) before taking a capsule it does not rank first for.
    expect(started.at - stopped.at).toBeLessThan(3000);
    // The giver stays away (its cooldown) although it ranks first for the capsule, or not.
    other.cutSince = null;
    const before = owner.events.length;
    await new Promise((r) => setTimeout(r, 500));
    expect(owner.events.length).toBe(before);
    expect(other.ownership.owns(capsule)).toBe(true);
  });

  it('a lone replica keeps a capsule it cannot reach (nobody else could take it)', async () => {
    const capsule = `c-${randomUUID().slice(0, 8)}`;
    const a = side('solo', capsule);
    await until('owned', () => a.ownership.owns(capsule));
    a.cutSince = Date.now();
    await new Promise((r) => setTimeout(r, 800));
    expect(a.ownership.owns(capsule)).toBe(true);
    expect(a.events.map((e) => e.kind)).toEqual(['start']);
  });
});
