/**
 * Which capsules this replica ingests, in a fleet sharing one Redis (Sentinel, Cluster): one lease
 * per capsule (lease.ts) with a fencing token, spread by rendezvous hashing over the live replica set
 * (replicas.ts), announced over pub/sub (fleet-bus.ts) so a release or a join is acted on at once.
 *
 * The rules, in order of importance:
 * - ingestion starts only after the lease is acquired, and stops BEFORE it is released, or as soon as
 *   this replica may have lost it: a renew that says "not yours", an append refused by the fence, or
 *   no successful renew for the TTL minus a margin (a watchdog timer, so a stalled Redis call never
 *   delays the stop). A paused replica that wakes up past its lease is fenced by append.lua anyway.
 * - a replica acquires the capsules it ranks first for, and a capsule whose lease has been free for a
 *   whole TTL (its first-ranked replica is not taking it). An owner that no longer ranks first (a
 *   replica joined) hands over: stop, flush its queued appends (bounded), release, announce.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { FleetBus, type FleetMessage } from './fleet-bus.js';
import { LeaseStore, type HeldLease } from './lease.js';
import { ReplicaSet } from './replicas.js';
import type { CapsuleOwnership, IngestionControl, OwnerView } from './types.js';
import { withTimeout } from '../timeouts.js';

export interface FleetOwnershipOptions {
  client: Redis | Cluster;
  replicaId: string;
  /** Lease TTL: a dead owner's capsules are taken over about this long after it died. */
  ttlMs: number;
  /** Renew (and heartbeat) interval, well inside the TTL. */
  renewMs: number;
  control: IngestionControl;
  logger?: Logger;
  keyPrefix?: string;
  /** Longest wait for a capsule's queued appends on a graceful handover. */
  handoverFlushMs?: number;
  /**
   * An owned capsule this replica cannot reach for this long is handed over when another replica
   * is alive (it may reach it: a partition cuts paths, not capsules). Absent: never.
   */
  giveUpAfterMs?: number;
  /** After giving a capsule up, this replica does not take it back for this long (ms). */
  giveUpCooldownMs?: number;
}

interface Owned {
  lease: HeldLease;
  watchdog: NodeJS.Timeout | null;
  /** Not handed over to a better-ranked replica before this time (see acquire). */
  keepUntil: number;
}

const noop = (): void => {};

export class FleetOwnership implements CapsuleOwnership {
  readonly replicaId: string;
  private readonly leases: LeaseStore;
  private readonly replicas: ReplicaSet;
  private bus: FleetBus | null = null;
  private readonly capsules = new Set<string>();
  private readonly owned = new Map<string, Owned>();
  /** Per-capsule serialisation of acquire / renew / hand-over steps. */
  private readonly busy = new Map<string, Promise<void>>();
  /** The last token this replica held per capsule (kept after losing it). */
  private readonly lastFence = new Map<string, number>();
  /** When each capsule we do not rank first for was first seen with a free lease. */
  private readonly freeSince = new Map<string, number>();
  /** Capsules given up for an unreachable upstream: not taken back before this time. */
  private readonly cooldown = new Map<string, number>();
  private readonly margin: number;
  private readonly logger: Logger | undefined;
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private again = false;
  private joined = false;
  private closing = false;
  private passDone: () => void = noop;
  private readonly firstPass = new Promise<void>((resolve) => (this.passDone = resolve));

  constructor(private readonly options: FleetOwnershipOptions) {
    this.replicaId = options.replicaId;
    this.logger = options.logger;
    this.leases = new LeaseStore(options.client, options.replicaId, options.ttlMs, options.keyPrefix);
    this.replicas = new ReplicaSet(options.client, options.replicaId, options.ttlMs, options.keyPrefix);
    // Stop ingesting this long before the lease can expire: a renew interval, at least a fifth of the TTL.
    this.margin = Math.min(options.ttlMs / 2, Math.max(options.renewMs, options.ttlMs / 5));
  }

  start(): void {
    if (this.bus || this.closing) return;
    this.bus = new FleetBus(
      this.options.client,
      (m) => this.onMessage(m),
      this.options.keyPrefix,
      this.logger,
    );
    // (Re)connected: act now rather than at the next tick (start-up before Redis answers, an outage).
    this.options.client.on('ready', this.onReady);
    this.kick();
  }

  setCapsules(ids: readonly string[]): void {
    const next = new Set(ids);
    for (const c of [...this.capsules]) if (!next.has(c)) this.capsules.delete(c);
    for (const c of next) this.capsules.add(c);
    if (this.bus) this.kick();
  }

  lost(capsule: string, reason: string, fence?: number): void {
    const owned = this.owned.get(capsule);
    // A refusal of an older term's batch says nothing about the lease held now.
    if (owned && (fence === undefined || fence >= owned.lease.fence)) void this.drop(capsule, reason);
  }

  owns(capsule: string): boolean {
    return this.owned.has(capsule);
  }

  async owners(ids: readonly string[]): Promise<Map<string, OwnerView>> {
    const views = await Promise.all(
      ids.map(async (id): Promise<[string, OwnerView]> => {
        try {
          const view = await this.leases.peek(id);
          return [id, { owner: view.owner, fencingToken: view.fence }];
        } catch {
          const own = this.owned.get(id);
          return [id, { owner: own ? this.replicaId : null, fencingToken: own?.lease.fence ?? 0 }];
        }
      }),
    );
    return new Map(views);
  }

  async releaseAll(timeoutMs = 5000): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const work = (async () => {
      // Out of the live set first: others rank the released capsules without this replica.
      await this.replicas.leave().catch(noop);
      await Promise.all([...this.owned].map(([c, o]) => this.handOver(c, o, 'shutting down').catch(noop)));
      await this.bus?.publish({ type: 'leave', replica: this.replicaId });
    })();
    await withTimeout(work, timeoutMs);
    // Whatever is still held (Redis unreachable) stops ingesting now; its lease just expires.
    await Promise.all([...this.owned.keys()].map((c) => this.drop(c, 'shutting down')));
  }

  async close(): Promise<void> {
    await this.releaseAll();
    this.options.client.off('ready', this.onReady);
    this.bus?.close();
  }

  settled(timeoutMs: number): Promise<void> {
    return withTimeout(this.firstPass, timeoutMs);
  }

  private readonly onReady = (): void => this.kick();

  private onMessage(message: FleetMessage): void {
    if (message.replica === this.replicaId || this.closing) return;
    this.logger?.debug({ message }, 'fleet message');
    // Given up by an owner that cannot reach it: free for anyone now, not after a whole TTL.
    if (message.type === 'release' && message.unreachable) {
      this.freeSince.set(message.capsule, Date.now() - this.options.ttlMs);
    }
    this.kick();
  }

  /** Run a tick now (or right after the one running), then every renew interval. */
  private kick(): void {
    if (this.closing) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ticking = true;
    const startedAt = Date.now();
    void this.tick().finally(() => {
      this.ticking = false;
      if (this.closing) return;
      if (this.again) {
        this.again = false;
        this.kick();
        return;
      }
      const delay = Math.max(0, this.options.renewMs - (Date.now() - startedAt));
      this.timer = setTimeout(() => this.kick(), delay);
    });
  }

  private async tick(): Promise<void> {
    let reached = false;
    try {
      await this.replicas.beat();
      reached = true;
      if (!this.joined) {
        this.joined = true;
        void this.bus?.publish({ type: 'join', replica: this.replicaId });
      }
    } catch (err) {
      this.logger?.debug({ err: String(err) }, 'fleet heartbeat failed');
    }
    const all = new Set([...this.capsules, ...this.owned.keys()]);
    await Promise.all([...all].map((c) => this.serial(c, () => this.step(c))));
    // The first pass that reached Redis (a pass while it is still connecting decides nothing).
    if (reached) this.passDone();
  }

  private serial(capsule: string, fn: () => Promise<void>): Promise<void> {
    const running = this.busy.get(capsule);
    if (running) return running; // a slow step (Redis timing out) is not queued behind again
    const p = fn()
      // Redis unreachable fails every step each tick: the watchdog and the store's own logs say more.
      .catch((err: unknown) => this.logger?.debug({ capsule, err: String(err) }, 'fleet step failed'))
      .finally(() => this.busy.delete(capsule));
    this.busy.set(capsule, p);
    return p;
  }

  private async step(capsule: string): Promise<void> {
    const owned = this.owned.get(capsule);
    if (owned) {
      if (!this.capsules.has(capsule)) return this.handOver(capsule, owned, 'capsule removed');
      const sentAt = Date.now();
      let ours: boolean;
      try {
        ours = await this.leases.renew(owned.lease);
      } catch {
        return; // unreachable: the watchdog stops ingestion before the lease can expire
      }
      if (this.owned.get(capsule) !== owned) return; // dropped meanwhile
      if (!ours) return this.drop(capsule, 'lease lost');
      this.arm(capsule, owned, sentAt);
      const giveUpMs = this.options.giveUpAfterMs;
      const cutFor = this.options.control.unreachableFor?.(capsule) ?? 0;
      if (giveUpMs !== undefined && cutFor >= giveUpMs && this.replicas.live.length > 1) {
        // Another replica may reach it (a partition cuts a path, not the capsule): keep the lease
        // and nobody watches; hand it over (stop first, so never two watchers) and stay away a while.
        this.cooldown.set(capsule, Date.now() + (this.options.giveUpCooldownMs ?? 30_000));
        return this.handOver(capsule, owned, `upstream unreachable for ${cutFor} ms`, true);
      }
      const preferred = this.replicas.preferred(capsule);
      if (preferred !== this.replicaId && Date.now() >= owned.keepUntil) {
        return this.handOver(capsule, owned, `rebalance to ${preferred}`);
      }
      return;
    }
    if (this.closing || !this.capsules.has(capsule)) return;
    const away = this.cooldown.get(capsule);
    if (away !== undefined) {
      if (Date.now() < away) return;
      this.cooldown.delete(capsule);
    }
    if (this.replicas.preferred(capsule) !== this.replicaId) {
      // Not ours to take, unless it has stayed free for a whole TTL (its preferred owner is not coming).
      const view = await this.leases.peek(capsule);
      if (view.owner !== null) {
        this.freeSince.delete(capsule);
        return;
      }
      const since = this.freeSince.get(capsule) ?? Date.now();
      this.freeSince.set(capsule, since);
      if (Date.now() - since < this.options.ttlMs) return;
    }
    await this.acquire(capsule, this.replicas.preferred(capsule) !== this.replicaId);
  }

  /**
   * `fallback`: taken although another live replica ranks first, because it left the lease free for
   * a whole TTL (it may not front this capsule yet: a registry change still on its way). Kept a while
   * before any rebalance, so a replica that never takes it cannot make the capsule flap every TTL.
   */
  private async acquire(capsule: string, fallback = false): Promise<void> {
    const sentAt = Date.now();
    const lease = await this.leases.acquire(capsule);
    if (!lease) return;
    if (this.closing || !this.capsules.has(capsule)) {
      await this.leases.release(lease).catch(noop);
      return;
    }
    const keepUntil = fallback ? Date.now() + 6 * this.options.ttlMs : 0;
    const owned: Owned = { lease, watchdog: null, keepUntil };
    this.owned.set(capsule, owned);
    this.freeSince.delete(capsule);
    this.arm(capsule, owned, sentAt);
    const own = this.lastFence.get(capsule);
    const continues = own !== undefined && own === lease.previous ? own : undefined;
    this.lastFence.set(capsule, lease.fence);
    this.logger?.info(
      { capsule, fence: lease.fence, replica: this.replicaId, continues: continues !== undefined },
      'capsule acquired',
    );
    this.options.control.start(capsule, lease.fence, continues, () => this.owns(capsule));
  }

  /** The lease is ours until at least sentAt + TTL: stop ingesting a margin before that. */
  private arm(capsule: string, owned: Owned, sentAt: number): void {
    if (owned.watchdog) clearTimeout(owned.watchdog);
    const due = sentAt + this.options.ttlMs - this.margin - Date.now();
    owned.watchdog = setTimeout(() => this.lost(capsule, 'lease renewal overdue'), Math.max(0, due));
  }

  /** Stop ingesting now (not serialised: a stalled step must not delay it); give the lease back if ours. */
  private drop(capsule: string, reason: string): Promise<void> {
    const owned = this.owned.get(capsule);
    if (!owned) return Promise.resolve();
    this.owned.delete(capsule);
    if (owned.watchdog) clearTimeout(owned.watchdog);
    this.logger?.warn({ capsule, reason, fence: owned.lease.fence }, 'capsule lost');
    const stopped = this.options.control.stop(capsule);
    // Compare-and-delete: frees it at once if it is still ours (Redis was only slow), else a no-op.
    void stopped.then(() => this.leases.release(owned.lease)).catch(noop);
    return stopped;
  }

  /** Graceful: stop, flush what is queued (bounded), release, announce. */
  private async handOver(capsule: string, owned: Owned, reason: string, unreachable = false): Promise<void> {
    if (this.owned.get(capsule) !== owned) return;
    this.owned.delete(capsule);
    if (owned.watchdog) clearTimeout(owned.watchdog);
    const t0 = Date.now();
    await this.options.control.stop(capsule);
    const flushMs = this.options.handoverFlushMs ?? Math.min(2000, this.options.ttlMs / 2);
    await this.options.control.flush(capsule, flushMs);
    const released = await this.leases.release(owned.lease).catch(() => false);
    this.logger?.info({ capsule, reason, released, ms: Date.now() - t0 }, 'capsule handed over');
    if (released)
      await this.bus?.publish({
        type: 'release',
        replica: this.replicaId,
        capsule,
        ...(unreachable ? { unreachable } : {}),
      });
  }
}
