/**
 * API keys (`apiKeys` in config): looked up by the SHA-256 of the presented key, compared in
 * constant time against every configured hash. BeeOS `oag_…` keys are just keys. Only hashes are
 * held; the key id reported in logs and tickets is the first 12 hex of the hash (not a secret).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ApiKeyConfig } from '../config/schema.js';
import type { Principal, Scope } from './principal.js';

const keyIdOf = (sha256hex: string): string => sha256hex.slice(0, 12);

export interface KeyRing {
  readonly size: number;
  /** The principal of a presented key, or null when no configured key matches. */
  lookup(key: string, ip: string): Principal | null;
}

/** A configured key; `streams` may be absent where a key is built by hand (tests). */
type KeyConfig = Omit<ApiKeyConfig, 'streams'> & { streams?: readonly string[] };

export const createKeyRing = (keys: readonly KeyConfig[]): KeyRing => {
  // A key's scope and capsule sets are built once: every principal of that key shares them (read only).
  const entries = keys.map((k) => ({
    hash: Buffer.from(k.sha256, 'hex'),
    config: k,
    scopes: new Set<Scope>(k.scopes) as ReadonlySet<Scope>,
    capsules: k.capsules.includes('*') ? ('*' as const) : (new Set(k.capsules) as ReadonlySet<string>),
    keyId: keyIdOf(k.sha256),
  }));
  return {
    size: entries.length,
    lookup(key, ip) {
      const presented = createHash('sha256').update(key, 'utf8').digest();
      let found: (typeof entries)[number] | null = null;
      // No early exit: every hash is compared, so timing says nothing about which one matched.
      for (const e of entries) {
        if (e.hash.length === presented.length && timingSafeEqual(e.hash, presented) && found === null)
          found = e;
      }
      if (!found) return null;
      const { config } = found;
      return {
        kind: 'key',
        owner: config.owner,
        scopes: found.scopes,
        capsules: found.capsules,
        keyId: found.keyId,
        ip,
        ...(config.streams && config.streams.length > 0 ? { streams: config.streams } : {}),
      };
    },
  };
};
