/**
 * `Authorization: Bearer oag_…` → owner. Keys are configured as SHA-256 hashes; the presented key is
 * hashed and compared in constant time. No keys configured = open surface (owner `anonymous`).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { AdapterConfig } from '../../src/http/adapter-deps.js';
import { API_KEY_PATTERN } from './constants.js';
import { BeeosError } from './errors.js';

/** Owner of every channel when the surface is open. */
export const OPEN_OWNER = 'anonymous';

/** True when no BeeOS keys are configured: the lead logs a warning at start. */
export const beeosSurfaceIsOpen = (config: Pick<AdapterConfig, 'beeosKeys'>): boolean =>
  config.beeosKeys.length === 0;

/** SHA-256 of a key, lowercase hex: the form keys are configured in. */
export const hashApiKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/** Resolve the caller's owner or throw 401 (missing_token / invalid_token). */
export const authenticate = (
  config: Pick<AdapterConfig, 'beeosKeys'>,
  header: string | undefined,
): string => {
  if (beeosSurfaceIsOpen(config)) return OPEN_OWNER;
  if (!header) throw new BeeosError('missing_token', 'missing Authorization bearer token');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new BeeosError('missing_token', 'Authorization must be "Bearer <key>"');
  const key = match[1] ?? '';
  if (!API_KEY_PATTERN.test(key)) throw new BeeosError('invalid_token', 'invalid API key');
  const presented = createHash('sha256').update(key).digest();
  let owner: string | null = null;
  for (const k of config.beeosKeys) {
    const stored = Buffer.from(k.sha256.toLowerCase(), 'hex');
    // Compare every key (no early exit) so timing says nothing about which one matched.
    if (stored.length === presented.length && timingSafeEqual(stored, presented) && owner === null)
      owner = k.owner;
  }
  if (owner === null) throw new BeeosError('invalid_token', 'invalid API key');
  return owner;
};
