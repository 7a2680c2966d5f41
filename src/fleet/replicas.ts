/**
 * The live replica set: every replica refreshes its heartbeat in one Redis ZSET (`<prefix>:fleet:replicas`,
 * scored by expiry on Redis's clock) each renew interval and reads the set back in the same call, so
 * rendezvous hashing ranks capsules over the replicas that are alive now. A replica whose heartbeat
 * lapses (SIGKILL, partition) drops out after one lease TTL, when its leases expire too.
 */
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

interface BeatCommands {
  mgReplicasBeat(key: string, replicaId: string, ttlMs: number, leaving: '0' | '1'): Promise<string[]>;
}

const lua = readFileSync(new URL('./lua/replicas-beat.lua', import.meta.url), 'utf8');

export class ReplicaSet {
  private readonly redis: (Redis | Cluster) & BeatCommands;
  private readonly key: string;
  private current: string[];

  constructor(
    client: Redis | Cluster,
    readonly replicaId: string,
    private readonly ttlMs: number,
    prefix = 'mg',
  ) {
    this.redis = client as (Redis | Cluster) & BeatCommands;
    this.redis.defineCommand('mgReplicasBeat', { numberOfKeys: 1, lua });
    this.key = `${prefix}:fleet:replicas`;
    this.current = [replicaId];
  }

  /** The replicas seen alive at the last successful beat (this one always included). */
  get live(): readonly string[] {
    return this.current;
  }

  /** Refresh this replica's heartbeat and read the live set. Throws when Redis fails. */
  async beat(): Promise<readonly string[]> {
    const live = await this.redis.mgReplicasBeat(this.key, this.replicaId, this.ttlMs, '0');
    this.current = live.includes(this.replicaId) ? live : [...live, this.replicaId];
    return this.current;
  }

  /** Leave the set now (SIGTERM), so others rank capsules without this replica at once. */
  async leave(): Promise<void> {
    await this.redis.mgReplicasBeat(this.key, this.replicaId, this.ttlMs, '1');
    this.current = [this.replicaId];
  }

  /** Rendezvous (highest random weight) choice: the replica ranked first for `capsule`. */
  preferred(capsule: string): string {
    return rendezvous(capsule, this.current);
  }
}

/**
 * Highest random weight: each (capsule, replica) pair gets a hash; the replica with the highest one
 * owns the capsule. A replica joining or leaving moves only the capsules it wins or held (~1/N).
 */
export const rendezvous = (capsule: string, replicas: readonly string[]): string => {
  let best = '';
  let bestWeight = -1;
  for (const replica of replicas) {
    const weight = createHash('sha256').update(`${capsule}\0${replica}`).digest().readUIntBE(0, 6);
    if (weight > bestWeight || (weight === bestWeight && replica < best)) {
      best = replica;
      bestWeight = weight;
    }
  }
  return best;
};
