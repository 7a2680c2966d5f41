/** Subscriptions in process memory (the embedded store): nothing survives a restart. */
import { MemoryOwnedDocuments } from '../webhooks/owned-documents.js';
import type { KeyRing, SubscriptionDoc, SubscriptionStore } from './types.js';

export class MemorySubscriptionStore
  extends MemoryOwnedDocuments<SubscriptionDoc>
  implements SubscriptionStore
{
  private ring: string | null = null;

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
