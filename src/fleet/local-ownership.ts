/**
 * Ownership with the embedded store: one process and one log, so this replica owns every capsule it
 * fronts. Fencing tokens mean nothing here (the memory store ignores them); they are reported as 0.
 */
import type { CapsuleOwnership, IngestionControl, OwnerView } from './types.js';

export class LocalOwnership implements CapsuleOwnership {
  private readonly capsules = new Set<string>();
  private started = false;

  constructor(
    readonly replicaId: string,
    private readonly control: IngestionControl,
  ) {}

  settled(): Promise<void> {
    return Promise.resolve(); // start() starts every capsule synchronously
  }

  start(): void {
    this.started = true;
    for (const capsule of this.capsules) this.begin(capsule);
  }

  setCapsules(ids: readonly string[]): void {
    const next = new Set(ids);
    for (const capsule of [...this.capsules]) {
      if (next.has(capsule)) continue;
      this.capsules.delete(capsule);
      void this.control.stop(capsule);
    }
    for (const capsule of next) {
      if (this.capsules.has(capsule)) continue;
      this.capsules.add(capsule);
      if (this.started) this.begin(capsule);
    }
  }

  private begin(capsule: string): void {
    this.control.start(capsule, 0, undefined, () => this.owns(capsule));
  }

  lost(): void {
    // Nothing can take a capsule from the only process.
  }

  owns(capsule: string): boolean {
    return this.started && this.capsules.has(capsule);
  }

  owners(ids: readonly string[]): Promise<Map<string, OwnerView>> {
    return Promise.resolve(
      new Map(ids.map((id) => [id, { owner: this.owns(id) ? this.replicaId : null, fencingToken: 0 }])),
    );
  }

  async releaseAll(): Promise<void> {
    this.started = false;
    await Promise.all([...this.capsules].map((c) => this.control.stop(c)));
  }

  async close(): Promise<void> {
    await this.releaseAll();
  }
}
