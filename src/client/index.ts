/**
 * murmur-gateway/client: follow a capsule's log, a BeeOS channel, or many streams of any surface over
 * one connection (`followMany`) from a browser (or Node 20+),
 * exactly once and in order across reconnects, with automatic long-poll fallback behind proxies.
 * No runtime dependency: the gateway serves this bundled as one ES module at
 * `GET /client/murmur-gateway.js`.
 */
export { followCapsule } from './follow-capsule.js';
export { followBeeos } from './follow-beeos.js';
export { followMany } from './follow-many.js';
export { TicketSource } from './auth.js';
export type {
  BeeosEnvelope,
  CapsuleFact,
  CapsuleFrame,
  CapsuleGap,
  CapsuleRecord,
  CapsuleSubmission,
  FollowBeeosOptions,
  FollowCapsuleOptions,
  FollowManyEvent,
  FollowManyOptions,
  FollowManySubscription,
  FollowState,
  FollowTuning,
  Subscription,
  TokenInput,
  Transport,
} from './types.js';
