/**
 * Secure by default: with no API key and no JWT configured every caller has every scope, so such a
 * gateway serves only on a loopback address unless `auth.open` says the operator means it.
 */
import { isIP } from 'node:net';
import type { GatewayConfig } from '../config/schema.js';

const isLoopbackHost = (host: string): boolean => {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return h.startsWith('::ffff:127.');
};

const authConfigured = (config: Pick<GatewayConfig, 'apiKeys' | 'jwt'>): boolean =>
  config.apiKeys.length > 0 || config.jwt !== undefined;

export type AuthPosture = 'enforced' | 'loopback-open' | 'open';

/** The one message a refused start prints (then exit 2, like a configuration error). */
const OPEN_REFUSAL = (host: string): string =>
  `refusing to serve on ${host} without authentication: configure apiKeys (sha256 of each key, owner, ` +
  `scopes) or jwt (issuer, audience, secret/publicKey/jwksFile) in the config file, bind a loopback ` +
  `address (--host 127.0.0.1), or set auth: {open: true} to serve every caller without credentials`;

/** How this configuration serves, or the refusal message when it must not start. */
export const authPosture = (
  config: Pick<GatewayConfig, 'apiKeys' | 'jwt' | 'auth' | 'host'>,
): { posture: AuthPosture } | { refuse: string } => {
  if (authConfigured(config)) return { posture: 'enforced' };
  if (isLoopbackHost(config.host)) return { posture: 'loopback-open' };
  if (config.auth.open) return { posture: 'open' };
  return { refuse: OPEN_REFUSAL(config.host) };
};
