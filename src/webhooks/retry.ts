/**
 * Webhook retries (Durable Streams PROTOCOL.md §7, and A2A push notifications): exponential from
 * 1 s to 60 s, each ±20 % jitter.
 */
export const RETRY_BASE_MS = 1_000;
export const RETRY_MAX_MS = 60_000;

/** The wait before attempt `attempts + 1` after `attempts` failures in a row (attempts ≥ 1). */
export const retryDelayMs = (
  attempts: number,
  random: () => number = Math.random,
  firstMs = RETRY_BASE_MS,
): number => {
  const base = Math.min(RETRY_MAX_MS, firstMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
};
