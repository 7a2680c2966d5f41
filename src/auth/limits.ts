/**
 * Abuse bounds per caller, shared by every replica through the store's counters (src/log/
 * limit-counters.ts): token buckets per client IP and per credential, a cap on open requests on
 * capsule surfaces (streams and long-polls are what stays open) per IP and per credential, and a cap
 * on submissions per owner per minute. Every bound is off until configured. A store that does not
 * answer lets the request through (logged): the limits protect the gateway, they must not take it
 * down with Redis.
 */
import type { Logger } from 'pino';
import type { BucketSpec, LimitCounters } from './limit-counters.js';
import type { Principal } from './principal.js';

export interface BucketConfig {
  requestsPerSecond: number;
  burst?: number | undefined;
}

export interface LimitsConfig {
  ip: BucketConfig;
  key: BucketConfig;
  streamsPerIp: number;
  streamsPerKey: number;
  submissionsPerMinute: number;
}

/** What the request is, as far as the bounds care. */
export interface RequestShape {
  /** On a capsule's surface (native, BeeOS, Flue) or Durable Streams: counted against the open-request caps. */
  capsuleSurface: boolean;
  /** Creates work upstream or in the log (a POST on a capsule's surface). */
  submission: boolean;
}

export type Admission =
  | { ok: true; release: () => void }
  | { ok: false; reason: 'rate' | 'streams' | 'submissions'; retryAfterSeconds: number };

/** How long a slot's lease lasts without renewal (a crashed replica's slots free after this). */
const SLOT_LEASE_MS = 30_000;
const RENEW_MS = 10_000;
/** Retry-After for a full stream cap: nothing tells when a stream will end; a short wait. */
const STREAM_RETRY_SECONDS = 5;

const bucket = (b: BucketConfig): BucketSpec | null =>
  b.requestsPerSecond > 0
    ? { ratePerSecond: b.requestsPerSecond, burst: Math.max(1, b.burst || Math.ceil(b.requestsPerSecond)) }
    : null;

export class AbuseLimits {
  private readonly ipBucket: BucketSpec | null;
  private readonly keyBucket: BucketSpec | null;
  private readonly submitBucket: BucketSpec | null;
  /** This replica's open slots, key → members, renewed every RENEW_MS. */
  private readonly held = new Map<string, Set<string>>();
  private seq = 0;
  private renewTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly counters: LimitCounters,
    private readonly config: LimitsConfig,
    private readonly replicaId: string,
    private readonly logger: Logger,
  ) {
    this.ipBucket = bucket(config.ip);
    this.keyBucket = bucket(config.key);
    const perMinute = config.submissionsPerMinute;
    this.submitBucket = perMinute > 0 ? { ratePerSecond: perMinute / 60, burst: perMinute } : null;
  }

  /** Whether any bound is configured (else the middleware is not installed). */
  get enabled(): boolean {
    return (
      this.ipBucket !== null ||
      this.keyBucket !== null ||
      this.submitBucket !== null ||
      this.config.streamsPerIp > 0 ||
      this.config.streamsPerKey > 0
    );
  }

  async admit(p: Principal, shape: RequestShape): Promise<Admission> {
    try {
      return await this.check(p, shape);
    } catch (err) {
      this.logger.warn({ err }, 'limits: counters unavailable, request let through');
      return { ok: true, release: () => undefined };
    }
  }

  private async check(p: Principal, shape: RequestShape): Promise<Admission> {
    const buckets: [string, BucketSpec, 'rate' | 'submissions'][] = [];
    if (this.ipBucket) buckets.push([`ip:${p.ip}`, this.ipBucket, 'rate']);
    if (this.keyBucket && p.keyId) buckets.push([`key:${p.keyId}`, this.keyBucket, 'rate']);
    if (this.submitBucket && shape.submission)
      buckets.push([`owner:${p.owner}`, this.submitBucket, 'submissions']);
    for (const [key, spec, reason] of buckets) {
      const taken = await this.counters.take(key, spec);
      if (!taken.allowed)
        return { ok: false, reason, retryAfterSeconds: Math.max(1, Math.ceil(taken.retryAfterMs / 1000)) };
    }
    if (!shape.capsuleSurface) return { ok: true, release: () => undefined };
    const slots: [string, number][] = [];
    if (this.config.streamsPerIp > 0) slots.push([`ip:${p.ip}`, this.config.streamsPerIp]);
    if (this.config.streamsPerKey > 0 && p.keyId) slots.push([`key:${p.keyId}`, this.config.streamsPerKey]);
    const member = `${this.replicaId}:${++this.seq}`;
    const taken: string[] = [];
    const release = (): void => {
      for (const key of taken) {
        const members = this.held.get(key);
        members?.delete(member);
        if (members?.size === 0) this.held.delete(key);
        void this.counters.releaseSlot(key, member).catch((err: unknown) => {
          this.logger.warn({ err }, 'limits: slot release failed (its lease expires)');
        });
      }
    };
    for (const [key, cap] of slots) {
      if (!(await this.counters.acquireSlot(key, member, cap, SLOT_LEASE_MS))) {
        release();
        return { ok: false, reason: 'streams', retryAfterSeconds: STREAM_RETRY_SECONDS };
      }
      taken.push(key);
      const members = this.held.get(key) ?? new Set<string>();
      members.add(member);
      this.held.set(key, members);
    }
    if (taken.length > 0) this.startRenewing();
    return { ok: true, release };
  }

  private startRenewing(): void {
    if (this.renewTimer) return;
    this.renewTimer = setInterval(() => {
      if (this.held.size === 0) return;
      const snapshot = new Map([...this.held].map(([k, v]) => [k, [...v]]));
      this.counters.renewSlots(snapshot, SLOT_LEASE_MS).catch((err: unknown) => {
        this.logger.warn({ err }, 'limits: slot lease renewal failed');
      });
    }, RENEW_MS);
    this.renewTimer.unref();
  }

  close(): void {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = null;
  }
}
