/**
 * Waiting for a claim (`core.claimOnce`) that another request, on this replica or another, holds:
 * the surfaces that close a race across replicas with a claim (an idempotency key, a conversation's
 * admission order) all wait the same way. A claim is held until its holder's outcome is in the log,
 * so `settled` — read before each attempt and again right after winning — finds what the holder
 * made, and the waiter answers with that instead of doing the work twice.
 */
import type { GatewayCore, HeldClaim } from './types.js';

/** Longer than a submission may wait for its outcome (the upstream's submit timeout, 60 s). */
const CLAIM_TTL_MS = 75_000;
const RETRY_MS = 50;

export interface ClaimWait<T> {
  /** What an earlier holder settled (then no claim is needed); absent: nothing to look for. */
  settled?: () => Promise<T | null | undefined>;
  /** The surface's refusal once `CLAIM_TTL_MS` passed with the claim still held by another. */
  busy: () => Error;
}

export const claimOrSettled = async <T>(
  core: Pick<GatewayCore, 'claimOnce'>,
  capsule: string,
  key: string,
  wait: ClaimWait<T>,
): Promise<{ claim: HeldClaim } | { settled: T }> => {
  const deadline = Date.now() + CLAIM_TTL_MS;
  for (;;) {
    const before = await wait.settled?.();
    if (before) return { settled: before };
    const claim = await core.claimOnce(capsule, key, CLAIM_TTL_MS);
    if (claim) {
      // The holder before us may have finished between our read and our claim: read again.
      const after = await wait.settled?.();
      if (!after) return { claim };
      await claim.release();
      return { settled: after };
    }
    if (Date.now() > deadline) throw wait.busy();
    await new Promise((r) => setTimeout(r, RETRY_MS));
  }
};

/** The claim, waiting while another holds it (nothing a holder settles answers for this one). */
export const claimWhenFree = async (
  core: Pick<GatewayCore, 'claimOnce'>,
  capsule: string,
  key: string,
  busy: () => Error,
): Promise<HeldClaim> => {
  const got = await claimOrSettled<never>(core, capsule, key, { busy });
  if (!('claim' in got)) throw busy();
  return got.claim;
};
