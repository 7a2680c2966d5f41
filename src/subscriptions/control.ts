/**
 * What the subscriptions' control API takes and answers (PROTOCOL.md §6–7): a validated create
 * request, an ack, the stream views and claims it answers, and its refusals as a code union.
 */

import type { SubscriptionType } from './types.js';

/** A validated create request (the adapter checked every field). */
export interface SubscriptionRequest {
  type: SubscriptionType;
  pattern: string | null;
  streams: string[];
  webhookUrl: string | null;
  wakeStream: string | null;
  leaseTtlMs: number;
  description: string | null;
}

/** Where a path the subscriber names lives in the stream store. */
export type Resolve = (path: string) => string;

export interface StreamView {
  path: string;
  link_type: 'pattern' | 'explicit';
  acked_offset: string;
  tail_offset: string;
  has_pending: boolean;
}

export type SubscriptionError =
  | 'SUBSCRIPTION_NOT_FOUND'
  | 'SUBSCRIPTION_ALREADY_EXISTS'
  | 'TOO_MANY_SUBSCRIPTIONS'
  | 'TOO_MANY_WAKES'
  | 'NO_PENDING_WORK'
  | 'ALREADY_CLAIMED'
  | 'FENCED'
  | 'INVALID_OFFSET'
  | 'TOKEN_INVALID'
  | 'TOKEN_EXPIRED';

export type Outcome<T> =
  { ok: true; value: T } | { ok: false; code: SubscriptionError; message: string; holder?: string };

export const fail = <T>(code: SubscriptionError, message: string, holder?: string): Outcome<T> => ({
  ok: false,
  code,
  message,
  ...(holder !== undefined ? { holder } : {}),
});

/** The normalised configuration a re-confirming PUT must match. */
export const configHashOf = (r: SubscriptionRequest): string =>
  JSON.stringify([
    r.type,
    r.pattern,
    [...r.streams].sort(),
    r.webhookUrl,
    r.wakeStream,
    r.leaseTtlMs,
    r.description,
  ]);

export interface AckInput {
  wakeId: string;
  generation: number;
  acks: { stream: string; offset: string }[];
  done: boolean;
}

export interface Claimed {
  wake_id: string;
  generation: number;
  token: string;
  streams: StreamView[];
  lease_ttl_ms: number;
}
