/**
 * The serving set, changed at run time: applies each registry snapshot to the upstream map the core
 * reads (`hasCapsule`, `capsuleIds` and every surface follow it at once). An added capsule gets a
 * `CapsuleUpstream` and is handed to ingestion; a removed one stops ingesting and leaves the map (its
 * log stays in the store until retention); a changed url or door token replaces its upstream.
 */
import type { Logger } from 'pino';
import type { CapsuleUpstream } from '../upstream/capsule-upstream.js';
import type { CapsuleEntries, CapsuleEntry } from './registry.js';

/**
 * Who ingests. Without an ownership manager every replica ingests what it serves; a fleet's manager
 * takes this place and starts an upstream's ingestion only while this replica owns the capsule.
 */
export interface IngestionPort {
  add(id: string, upstream: CapsuleUpstream): void;
  /** Resolves once this replica no longer ingests it. */
  remove(id: string, upstream: CapsuleUpstream): Promise<void>;
}

/**
 * With an ownership manager (`CapsuleOwnership`): it starts ingestion when it wins a lease, after
 * `onChange` fed it the ids (`live.onChange((ids) => ownership.setCapsules(ids))`); a removed or
 * replaced upstream is stopped here, since it has already left the map its control looks in. A
 * replaced one is reported removed, then added, so the manager releases and re-acquires it.
 */
export const ingestByOwnership: IngestionPort = {
  add: () => {},
  remove: (_id, upstream) => upstream.stop(),
};

export interface LiveCapsulesOptions {
  /** The core's map: mutated in place. */
  upstreams: Map<string, CapsuleUpstream>;
  create(id: string, entry: CapsuleEntry): CapsuleUpstream;
  ingestion: IngestionPort;
  logger?: Logger;
}

const identity = (e: { url: string; doorToken?: string }): string =>
  JSON.stringify([e.url, e.doorToken ?? null]);

export class LiveCapsules {
  private readonly current = new Map<string, string>();
  private queue: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<(ids: string[]) => void>();
  private closed = false;

  constructor(private readonly options: LiveCapsulesOptions) {}

  /** The ids served now. */
  ids(): string[] {
    return [...this.options.upstreams.keys()];
  }

  /** Called with the served ids after each change is applied (e.g. an ownership manager's setCapsules). */
  onChange(listener: (ids: string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Apply a snapshot; snapshots are applied one after another, in the order given. */
  apply(entries: CapsuleEntries): Promise<void> {
    this.queue = this.queue
      .then(() => this.applyNow(entries))
      .catch((err: unknown) => {
        this.options.logger?.error({ err }, 'capsule set: applying a change failed');
      });
    return this.queue;
  }

  /** Stop every upstream (drain); later snapshots are ignored. */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    const { upstreams, ingestion } = this.options;
    await Promise.all([...upstreams].map(([id, u]) => ingestion.remove(id, u)));
  }

  private async applyNow(entries: CapsuleEntries): Promise<void> {
    if (this.closed) return;
    const { upstreams, ingestion, logger } = this.options;
    let removed = false;
    for (const [id, upstream] of [...upstreams]) {
      const entry = entries.get(id);
      if (entry && identity(entry) === this.current.get(id)) continue;
      // Out of the serving set first: new requests for it answer 404 from here on.
      upstreams.delete(id);
      this.current.delete(id);
      removed = true;
      await ingestion.remove(id, upstream);
      logger?.info({ capsule: id, replaced: Boolean(entry) }, entry ? 'capsule changed' : 'capsule removed');
    }
    if (removed) this.emit();
    let added = false;
    for (const [id, entry] of entries) {
      if (upstreams.has(id) || this.closed) continue;
      const upstream = this.options.create(id, entry);
      upstreams.set(id, upstream);
      this.current.set(id, identity(entry));
      added = true;
      ingestion.add(id, upstream);
      logger?.info({ capsule: id, url: entry.url, source: entry.source }, 'capsule added');
    }
    if (added) this.emit();
  }

  private emit(): void {
    for (const l of this.listeners) l(this.ids());
  }
}
