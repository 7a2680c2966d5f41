/**
 * Durable Streams subscriptions (PROTOCOL.md §6–7 of durable-streams/durable-streams): a consumer
 * subscribes to a glob of streams (and/or named ones) and is woken, by a signed webhook or through
 * a wake stream it claims, with the offsets it has not acked. Everything a subscription is lives in
 * one document in the gateway's store (memory or Redis), replaced whole by a compare-and-set on its
 * version, so every mutation is atomic and a replica acting on a stale copy is fenced: the
 * subscription, its acked offsets, the current wake, its lease, the retry schedule and which
 * replica delivers it. The signing keys live in the same store, generated once.
 */
import type { DocPut, OwnedDocuments, VersionedDoc } from '../webhooks/owned-documents.js';

export type SubscriptionType = 'webhook' | 'pull-wake';

/** One stream a subscription follows. Offsets are positions in the stream (0: nothing yet). */
export interface SubscriptionLink {
  /** As the subscriber names it (after `/v1/stream/`). */
  path: string;
  /** Where the stream lives in the stream store (the subscriber's namespace). */
  storePath: string;
  linkType: 'pattern' | 'explicit';
  /** Inclusive: every message up to this position is acked (the next wake starts after it). */
  acked: number;
}

/** The wake in flight: its id, generation and the tails it showed; the holder's lease. */
export interface Wake {
  id: string;
  generation: number;
  /** storePath → tail position at the wake. */
  tails: Record<string, number>;
  /** Pull-wake: the worker that claimed it; webhook: null. */
  holder: string | null;
  /** ms since epoch: past it the wake is dropped and pending work wakes again. */
  leaseUntil: number;
}

export interface SubscriptionDoc {
  id: string;
  /** The owner's tag (`o-…`), or null without auth. */
  owner: string | null;
  type: SubscriptionType;
  pattern: string | null;
  webhookUrl: string | null;
  wakeStream: string | null;
  /** Where the wake stream lives in the stream store. */
  wakeStorePath: string | null;
  leaseTtlMs: number;
  description: string | null;
  /** The normalised configuration a re-confirming PUT must match. */
  configHash: string;
  createdAt: string;
  status: 'active' | 'failed';
  links: SubscriptionLink[];
  /** Increments with every wake; fences callbacks, acks and releases of older ones. */
  generation: number;
  wake: Wake | null;
  /** Pull-wake: a wake event for the pending work is in the wake stream (reset when it is taken). */
  signalled: boolean;
  /** Failed webhook deliveries in a row; the next attempt waits (1 s → 60 s, ±20 %). */
  attempts: number;
  /** ms since epoch before which no delivery is attempted (persisted retry schedule). */
  nextAttemptAt: number;
  /** The replica delivering this subscription, and until when (a lease per subscription). */
  deliverer: { replica: string; until: number } | null;
  /** The gateway's public base URL at create: callback, claim and JWKS URLs are built on it. */
  baseUrl: string;
}

export type Versioned = VersionedDoc<SubscriptionDoc>;
export type PutOutcome = DocPut;

/** The Ed25519 signing keys (JWK) and the secret callback tokens are signed with. */
export interface SigningKey {
  kid: string;
  publicJwk: Record<string, string>;
  privateJwk: Record<string, string>;
  createdAt: number;
  /** Rotated out at: still published (verifiers may replay) until `retiredAt + replayWindowMs`. */
  retiredAt: number | null;
}

export interface KeyRing {
  keys: SigningKey[];
  /** base64url; HMAC key of the callback tokens. */
  tokenSecret: string;
}

/** Subscriptions as owned documents (`key`: the owner's tag and the id, subscriptionKey), plus the key ring. */
export interface SubscriptionStore extends OwnedDocuments<SubscriptionDoc> {
  /** The key ring as stored; `fresh` is stored first if there is none yet (generated once). */
  keyRing(fresh: () => KeyRing): Promise<KeyRing>;
  /** Replaces the ring if it is still `expected` (JSON-equal): rotation by one replica at a time. */
  replaceKeyRing(expected: KeyRing, next: KeyRing): Promise<boolean>;
  close(): Promise<void>;
}

/** The store key of an owner's subscription: ids are per owner, as stream paths are. */
export const subscriptionKey = (owner: string | null, id: string): string => `${owner ?? ''}|${id}`;
