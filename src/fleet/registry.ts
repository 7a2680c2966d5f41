/**
 * The fleet's capsule registry: which capsules the gateway fronts, shared by every replica. Redis
 * holds it when the log does (`registry-redis.ts`); the embedded store keeps it in memory here. The
 * config file and `--capsule` seed it at start (upsert); the admin API and discovery change it live.
 */
import { z } from 'zod';
import { CAPSULE_ID } from '../config/schema.js';

/** Who put an entry there: seeding rules and discovery's clean-up depend on it. */
export type CapsuleSource = 'config' | 'admin' | 'discovered';

export interface CapsuleEntry {
  url: string;
  /** Sent upstream only; never returned by the admin API. */
  doorToken?: string;
  source: CapsuleSource;
  /** ms since epoch */
  updatedAt: number;
  /** Discovered entries: `host:dir` of the scan that found it, so only that scan removes it. */
  discoveredBy?: string;
}

export type CapsuleEntries = Map<string, CapsuleEntry>;

export interface CapsuleRegistry {
  /** Seed `entries` (config wins for the ids it names), then sync and keep syncing. Never throws. */
  start(seed: Map<string, { url: string; doorToken?: string }>): void;
  list(): Promise<CapsuleEntries>;
  get(id: string): Promise<CapsuleEntry | null>;
  /** Upsert; `created` when the id was absent. Every replica sees it within seconds. */
  put(id: string, entry: CapsuleEntry): Promise<{ created: boolean }>;
  /** `true` when the id was there. */
  remove(id: string): Promise<boolean>;
  /** Called with the whole set each time it may have changed (a change, a notification, a resync). */
  onChange(listener: (entries: CapsuleEntries) => void): () => void;
  close(): Promise<void>;
}

const storedEntry = z.object({
  url: z.string(),
  doorToken: z.string().optional(),
  source: z.enum(['config', 'admin', 'discovered']).catch('admin'),
  updatedAt: z.number().catch(0),
  discoveredBy: z.string().optional(),
});

/** A stored value back to an entry; a foreign or corrupt value is skipped (null), never fatal. */
export const parseStoredEntry = (id: string, raw: string): CapsuleEntry | null => {
  if (!CAPSULE_ID.test(id)) return null;
  try {
    const parsed = storedEntry.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
};

/** Listeners and ordered delivery, shared by both registries. */
export class ChangeFanout {
  private readonly listeners = new Set<(entries: CapsuleEntries) => void>();

  add(listener: (entries: CapsuleEntries) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(entries: CapsuleEntries): void {
    for (const l of this.listeners) l(new Map(entries));
  }
}

/** The embedded store's registry: one process, so a change is seen at once. */
export class MemoryCapsuleRegistry implements CapsuleRegistry {
  private readonly entries: CapsuleEntries = new Map();
  private readonly fanout = new ChangeFanout();

  start(seed: Map<string, { url: string; doorToken?: string }>): void {
    for (const [id, c] of seed) this.entries.set(id, { ...c, source: 'config', updatedAt: Date.now() });
    this.fanout.emit(this.entries);
  }

  async list(): Promise<CapsuleEntries> {
    return new Map(this.entries);
  }

  async get(id: string): Promise<CapsuleEntry | null> {
    return this.entries.get(id) ?? null;
  }

  async put(id: string, entry: CapsuleEntry): Promise<{ created: boolean }> {
    const created = !this.entries.has(id);
    this.entries.set(id, entry);
    this.fanout.emit(this.entries);
    return { created };
  }

  async remove(id: string): Promise<boolean> {
    const had = this.entries.delete(id);
    if (had) this.fanout.emit(this.entries);
    return had;
  }

  onChange(listener: (entries: CapsuleEntries) => void): () => void {
    return this.fanout.add(listener);
  }

  async close(): Promise<void> {}
}
