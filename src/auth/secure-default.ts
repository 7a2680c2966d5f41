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

const authConfigured = (auth: Pick<GatewayConfig['auth'], 'apiKeys' | 'jwt'>): boolean =>
  auth.apiKeys.length > 0 || auth.jwt !== undefined;

export type AuthPosture = 'enforced' | 'loopback-open' | 'open';

/** The one message a refused start prints (then exit 2, like a configuration error). */
const OPEN_REFUSAL = (host: string): string =>
  `refusing to serve on ${host} without authentication: configure auth.apiKeys (sha256 of each key, owner, ` +
  `scopes) or auth.jwt (issuer, audience, secret/publicKey/jwksFile) in the config file, bind a loopback ` +
  `address (--host 127.0.0.1), or set auth: {open: true} to serve every caller without credentials`;

/** How this configuration serves, or the refusal message when it must not start. */
export const authPosture = (config: {
  auth: Pick<GatewayConfig['auth'], 'apiKeys' | 'jwt' | 'open'>;
  server: { host: string };
}): { posture: AuthPosture } | { refuse: string } => {
  const { auth, server } = config;
  if (authConfigured(auth)) return { posture: 'enforced' };
  if (isLoopbackHost(server.host)) return { posture: 'loopback-open' };
  if (auth.open) return { posture: 'open' };
  return { refuse: OPEN_REFUSAL(server.host) };
};
