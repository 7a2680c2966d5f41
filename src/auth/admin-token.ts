/**
 * The admin API's credential: a Bearer token whose SHA-256 matches one configured hash (config
 * `adminTokens: [{sha256}]`, or env `GATEWAY_ADMIN_TOKEN`, hashed at load). Only hashes are held;
 * the comparison runs in constant time over every configured hash, so timing tells nothing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

export interface AdminTokenCheck {
  /** No hash configured: the admin API is disabled. */
  readonly enabled: boolean;
  /** The `Authorization` header value, as sent (or undefined). */
  accepts(authorization: string | undefined): boolean;
}

export const createAdminTokenCheck = (hashes: readonly string[]): AdminTokenCheck => {
  const expected = hashes.map((h) => Buffer.from(h.toLowerCase(), 'hex'));
  return {
    enabled: expected.length > 0,
    accepts(authorization) {
      const match = /^Bearer ([^\s]+)$/i.exec(authorization?.trim() ?? '');
      if (!match) return false;
      const presented = createHash('sha256').update(match[1]!, 'utf8').digest();
      let ok = false;
      // No early exit: every configured hash is compared.
      for (const e of expected) if (e.length === presented.length && timingSafeEqual(e, presented)) ok = true;
      return ok;
    },
  };
};
