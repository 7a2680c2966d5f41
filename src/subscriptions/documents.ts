/**
 * The subscriptions' documents and keys, shared by the control API (manager.ts) and the wakes
 * (wakes.ts): every change is one compare-and-set of a subscription's document (types.ts), so two
 * replicas never both mint a wake and a replica working from an older copy is refused and reads
 * again; the signing key ring (one replica's rotation wins, the others adopt it); the stream views
 * a document shows; and the wakes in flight per owner as this replica counts them.
 */
import { randomUUID } from 'node:crypto';
import type { StreamStore } from '../streams/types.js';
import type { ReceiverPolicy } from '../webhooks/receiver-url.js';
import { fail, type Outcome, type StreamView } from './control.js';
import { formatStreamOffset, parseStreamOffset } from './offsets.js';
import { currentKey, freshKeyRing, jwksOf, rotated } from './signing.js';
import type { KeyRing, SubscriptionDoc, SubscriptionStore } from './types.js';

export interface SubscriptionSettings {
  receivers: ReceiverPolicy;
  /** Subscriptions one owner may hold. */
  maxPerOwner: number;
  /** Wakes one owner may have in flight at once (webhook deliveries and claims). */
  maxWakesPerOwner: number;
  /** Rotated-out signing keys stay published this long (receivers replaying old deliveries). */
  replayWindowMs: number;
  /** This replica, named in the delivery lease. */
  replicaId: string;
  /** How often every replica looks for due work. */
  sweepMs: number;
  /** How long a webhook receiver may take to answer. */
  deliveryTimeoutMs: number;
  /** How long a callback token is valid. */
  tokenTtlSeconds: number;
  /** The signing key is rotated when it is this old (0: never). */
  keyRotationMs: number;
}

/** A mutation: the new document, null to delete it, or a refusal to write anything. */
export type Change<T> = { doc: SubscriptionDoc | null; value: T } | { refuse: Outcome<T> };

const MAX_CAS_TRIES = 20;

export class SubscriptionDocuments {
  private ring: KeyRing | null = null;
  /** Wakes in flight per owner as the last sweep saw them, plus those minted since. */
  private wakesByOwner = new Map<string, number>();

  constructor(
    readonly store: SubscriptionStore,
    readonly streams: StreamStore,
    readonly settings: SubscriptionSettings,
  ) {}

  async keyRing(): Promise<KeyRing> {
    this.ring ??= await this.store.keyRing(freshKeyRing);
    return this.ring;
  }

  async jwks(): Promise<{ keys: Record<string, string>[] }> {
    // Read each time: another replica may have rotated.
    return jwksOf(await this.refreshKeys(), this.settings.replayWindowMs);
  }

  async currentKid(): Promise<string> {
    return currentKey(await this.keyRing()).kid;
  }

  /**
   * The ring as stored now (another replica may have rotated it), rotated first if the current key
   * is `keyRotationMs` old: one replica's rotation wins, the others adopt it.
   */
  async refreshKeys(nowMs = Date.now()): Promise<KeyRing> {
    let ring = await this.store.keyRing(freshKeyRing);
    const rotation = this.settings.keyRotationMs;
    if (rotation > 0 && nowMs - currentKey(ring).createdAt >= rotation) {
      const next = rotated(ring, this.settings.replayWindowMs, nowMs);
      ring = (await this.store.replaceKeyRing(ring, next)) ? next : await this.store.keyRing(freshKeyRing);
    }
    this.ring = ring;
    return ring;
  }

  async change<T>(
    key: string,
    fn: (doc: SubscriptionDoc | null) => Promise<Change<T>> | Change<T>,
  ): Promise<Outcome<T>> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const current = await this.store.get(key);
      const result = await fn(current ? structuredClone(current.doc) : null);
      if ('refuse' in result) return result.refuse;
      if (result.doc === null && !current) return { ok: true, value: result.value };
      const put = await this.store.put(key, current?.version ?? 0, result.doc, this.settings.maxPerOwner);
      if (put.kind === 'written') return { ok: true, value: result.value };
      if (put.kind === 'owner_full')
        return fail(
          'TOO_MANY_SUBSCRIPTIONS',
          `this owner holds ${this.settings.maxPerOwner} subscriptions already`,
        );
    }
    throw new Error(`subscription ${key}: kept racing another writer`);
  }

  /** The sweep's count of wakes in flight per owner (owner tag, '' without auth). */
  recountWakes(counts: Map<string, number>): void {
    this.wakesByOwner = counts;
  }

  ownerWakes(owner: string | null): number {
    return this.wakesByOwner.get(owner ?? '') ?? 0;
  }

  countWake(owner: string | null): void {
    this.wakesByOwner.set(owner ?? '', this.ownerWakes(owner) + 1);
  }

  async streamViews(doc: SubscriptionDoc): Promise<StreamView[]> {
    return Promise.all(
      doc.links.map(async (l) => {
        const meta = await this.streams.head(l.storePath);
        const epoch = meta?.epoch ?? 0;
        const tail = meta && !meta.gone ? meta.tail : l.acked;
        return {
          path: l.path,
          link_type: l.linkType,
          acked_offset: meta ? formatStreamOffset(epoch, l.acked) : '-1',
          tail_offset: meta ? formatStreamOffset(epoch, tail) : '-1',
          has_pending: tail > l.acked,
        };
      }),
    );
  }

  mint(
    doc: SubscriptionDoc,
    streams: StreamView[],
    holder: string | null,
    now: number,
  ): NonNullable<SubscriptionDoc['wake']> {
    doc.generation += 1;
    const tails: Record<string, number> = {};
    for (const s of streams) {
      const link = doc.links.find((l) => l.path === s.path);
      const parsed = parseStreamOffset(s.tail_offset);
      if (link && parsed) tails[link.storePath] = parsed.position;
    }
    doc.wake = {
      id: `w_${randomUUID()}`,
      generation: doc.generation,
      tails,
      holder,
      leaseUntil: now + doc.leaseTtlMs,
    };
    return doc.wake;
  }

  /** Lapsed leases dropped; then a webhook delivered or a wake event written if work is due. */
}
