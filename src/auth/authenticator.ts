/**
 * Credentials → Principal. Built once from config: API keys, an optional JWT verifier and the ticket
 * signer. With no keys and no JWT configured every caller is `open` (all scopes): the gateway then
 * only serves on loopback unless `auth.open` (see secure-default.ts).
 */
import { createKeyRing, type KeyRing } from './keys.js';
import { anonymousPrincipal, openPrincipal, type Principal } from './principal.js';

export interface Credentials {
  authorization: string | undefined;
  /** `?ticket=` where the route accepts one (the middleware decides). */
  ticket: string | undefined;
  ip: string;
}

export interface JwtVerifier {
  /** A principal, or 'expired' / 'invalid'. */
  verify(token: string, ip: string): Promise<Principal | 'expired' | 'invalid'>;
}

export interface TicketVerifier {
  verify(ticket: string, ip: string): Promise<Principal | 'expired' | 'invalid'>;
}

export interface Authenticator {
  /** True when no credential is configured: every caller is `open`. */
  readonly open: boolean;
  resolve(creds: Credentials): Promise<Principal>;
}

export interface AuthenticatorParts {
  keys: KeyRing;
  jwt?: JwtVerifier | null;
  tickets?: TicketVerifier | null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
/** Three base64url segments: try it as a JWT. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export const createAuthenticator = (parts: AuthenticatorParts): Authenticator => {
  const open = parts.keys.size === 0 && !parts.jwt;
  return {
    open,
    async resolve({ authorization, ticket, ip }) {
      if (open) return openPrincipal(ip);
      if (authorization !== undefined && authorization.trim() !== '') {
        const token = BEARER.exec(authorization)?.[1];
        if (!token) return anonymousPrincipal(ip, 'invalid');
        const byKey = parts.keys.lookup(token, ip);
        if (byKey) return byKey;
        if (parts.jwt && JWT_SHAPE.test(token)) {
          const r = await parts.jwt.verify(token, ip);
          return typeof r === 'string' ? anonymousPrincipal(ip, r) : r;
        }
        return anonymousPrincipal(ip, 'invalid');
      }
      if (ticket !== undefined && parts.tickets) {
        const r = await parts.tickets.verify(ticket, ip);
        return typeof r === 'string' ? anonymousPrincipal(ip, r) : r;
      }
      return anonymousPrincipal(ip, 'missing');
    },
  };
};

export { createKeyRing };
