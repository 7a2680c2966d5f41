/** Subscriptions in process memory (the embedded store): nothing survives a restart. */
import type { KeyRing, PutOutcome, SubscriptionDoc, SubscriptionStore, Versioned } from './types.js';

export class MemorySubscriptionStore implements SubscriptionStore {
  private readonly docs = new Map<string, { json: string; version: number; owner: string }>();
  private ring: string | null = null;

  async get(key: string): Promise<Versioned | null> {
    const entry = this.docs.get(key);
    return entry ? { doc: JSON.parse(entry.json) as SubscriptionDoc, version: entry.version } : null;
  }

  async put(
    key: string,
    expected: number,
    doc: SubscriptionDoc | null,
    maxPerOwner: number,
  ): Promise<PutOutcome> {
    const current = this.docs.get(key);
    if ((current?.version ?? 0) !== expected) return { kind: 'moved' };
    if (doc === null) {
      this.docs.delete(key);
      return { kind: 'written', version: 0 };
    }
    const owner = doc.owner ?? '';
    if (!current && [...this.docs.values()].filter((d) => d.owner === owner).length >= maxPerOwner)
      return { kind: 'owner_full' };
    // A copy: a caller mutating its doc afterwards changes nothing stored.
    this.docs.set(key, { json: JSON.stringify(doc), version: expected + 1, owner });
    return { kind: 'written', version: expected + 1 };
  }

  async keys(): Promise<string[]> {
    return [...this.docs.keys()];
  }

  async ownerKeys(owner: string | null): Promise<string[]> {
    return [...this.docs].filter(([, d]) => d.owner === (owner ?? '')).map(([k]) => k);
  }

  async keyRing(fresh: () => KeyRing): Promise<KeyRing> {
    this.ring ??= JSON.stringify(fresh());
    return JSON.parse(this.ring) as KeyRing;
  }

  async replaceKeyRing(expected: KeyRing, next: KeyRing): Promise<boolean> {
    if (this.ring !== JSON.stringify(expected)) return false;
    this.ring = JSON.stringify(next);
    return true;
  }

  async close(): Promise<void> {}
}
