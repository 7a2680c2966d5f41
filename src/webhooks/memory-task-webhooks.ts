/** Task webhooks in process memory (the embedded store): nothing survives a restart. */
import type {
  TaskWebhookStore,
  TaskWebhooksDoc,
  TaskWebhooksPut,
  VersionedTaskWebhooks,
} from './task-webhooks.js';

export class MemoryTaskWebhookStore implements TaskWebhookStore {
  private readonly docs = new Map<string, { json: string; version: number; owner: string }>();

  async get(key: string): Promise<VersionedTaskWebhooks | null> {
    const entry = this.docs.get(key);
    return entry ? { doc: JSON.parse(entry.json) as TaskWebhooksDoc, version: entry.version } : null;
  }

  async put(
    key: string,
    expected: number,
    doc: TaskWebhooksDoc | null,
    maxPerOwner: number,
  ): Promise<TaskWebhooksPut> {
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
}
