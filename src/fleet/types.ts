/**
 * What the gateway asks of capsule ownership, whatever decides it: `ownership.ts` (a fleet sharing
 * Redis, leases with fencing tokens) or `local-ownership.ts` (the embedded store: one process owns all).
 */

/** How ownership starts and stops a capsule's ingestion (the gateway wires it to upstreams + writer). */
export interface IngestionControl {
  /**
   * Acquired with `fence`: stamp the capsule's appends with it, then open the watch once what is
   * still queued for the capsule is settled (the new term seeds from the stored tail). `continues`:
   * the token replaced is this replica's own last one (nobody held the capsule in between, e.g. the
   * lease lapsed during a Redis outage), so entries still queued under it are this replica's and are
   * re-stamped rather than refused. `held`: whether the capsule is still this replica's, asked once
   * the queue has settled (the term may have ended meanwhile).
   */
  start(capsule: string, fence: number, continues: number | undefined, held: () => boolean): void;
  /** Close the watch; resolves once the ingestor will append nothing more. */
  stop(capsule: string): Promise<void>;
  /** Wait (at most `timeoutMs`) until the capsule's queued appends are durable. */
  flush(capsule: string, timeoutMs: number): Promise<void>;
  /**
   * How long (ms) this replica's watch of an owned capsule has been unable to reach it (0 while
   * connected, or when the reason is not the path to the capsule, e.g. the store being away).
   */
  unreachableFor?(capsule: string): number;
}

export interface OwnerView {
  /** The owning replica, or null while nobody holds the capsule. */
  owner: string | null;
  fencingToken: number;
}

export interface CapsuleOwnership {
  readonly replicaId: string;
  /** Begin (never blocks on Redis: a replica may start before its Redis answers). */
  start(): void;
  /**
   * Resolves once the first ownership pass is done (capsules this replica wins are ingesting), or
   * after `timeoutMs`: start-up waits on it so a request right after start meets a watching upstream.
   */
  settled(timeoutMs: number): Promise<void>;
  /** The capsules to front, now: new ones become candidates, removed ones are released. */
  setCapsules(ids: readonly string[]): void;
  /**
   * This replica learned it lost `capsule` (an append stamped with `fence` was refused): stop
   * ingesting it now, unless it holds a newer token already.
   */
  lost(capsule: string, reason: string, fence?: number): void;
  /** Whether this replica ingests `capsule` now. */
  owns(capsule: string): boolean;
  /** Who owns each capsule (for /capsules). */
  owners(ids: readonly string[]): Promise<Map<string, OwnerView>>;
  /** SIGTERM: stop ingesting, flush, release every lease and leave the fleet, within `timeoutMs`. */
  releaseAll(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}
