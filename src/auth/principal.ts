/**
 * Who is calling: resolved once per request by the auth middleware (src/http/auth-middleware.ts)
 * and read by every adapter through `principalOf(c)`. Adapters never parse credentials; they ask
 * `may(principal, scope, capsule)` and answer a refusal in their own error grammar.
 */
import type { Context } from 'hono';

export const SCOPES = ['submit', 'observe', 'control', 'admin', 'ops', 'write'] as const;
export type Scope = (typeof SCOPES)[number];

export type PrincipalKind = 'key' | 'jwt' | 'ticket' | 'anonymous' | 'open';

export interface Principal {
  /**
   * `key`/`jwt`/`ticket`: authenticated. `open`: no auth configured (loopback or `auth.open`):
   * every scope on every capsule, owner `anonymous`. `anonymous`: auth is configured and the request
   * carried no credential (or an invalid one, see `failure`): no scope at all.
   */
  kind: PrincipalKind;
  owner: string;
  scopes: ReadonlySet<Scope>;
  capsules: '*' | ReadonlySet<string>;
  /** Stable non-secret id of the credential (first 12 hex of the key's SHA-256, `jwt:<sub>`, …); null when none. */
  keyId: string | null;
  /** Client IP (after trust-proxy resolution when configured). */
  ip: string;
  /**
   * General Durable Streams path patterns this credential is granted (`apiKeys[].streams`, e.g.
   * `team-a/**`): streams under them are shared by every credential granted them, whoever created
   * them; every other stream path names one of the owner's own (adapters/durable-streams/stream-owner.ts).
   */
  streams?: readonly string[];
  /** Why an `anonymous` principal has no credential: none sent, or one sent but refused. */
  failure?: 'missing' | 'invalid' | 'expired';
}

/** Owner of every record when no auth is configured (kept from the former BeeOS open mode). */
const OPEN_OWNER = 'anonymous';

/** Shared by every principal of their kind (read only). */
const ALL_SCOPES: ReadonlySet<Scope> = new Set(SCOPES);
const NO_SCOPES: ReadonlySet<Scope> = new Set();

export const openPrincipal = (ip: string): Principal => ({
  kind: 'open',
  owner: OPEN_OWNER,
  scopes: ALL_SCOPES,
  capsules: '*',
  keyId: null,
  ip,
});

export const anonymousPrincipal = (ip: string, failure: Principal['failure'] = 'missing'): Principal => ({
  kind: 'anonymous',
  owner: OPEN_OWNER,
  scopes: NO_SCOPES,
  capsules: '*',
  keyId: null,
  ip,
  failure,
});

/** May this principal use `scope` on `capsule` (omit capsule for capsule-less routes)? */
export const may = (p: Principal, scope: Scope, capsule?: string): boolean => {
  if (!p.scopes.has(scope)) return false;
  if (capsule === undefined || p.capsules === '*') return true;
  return p.capsules.has(capsule);
};

/** May the principal see this capsule at all (any scope)? Out-of-scope capsules answer 404. */
export const seesCapsule = (p: Principal, capsule: string): boolean =>
  p.capsules === '*' || p.capsules.has(capsule);

/**
 * The `WWW-Authenticate` challenge of a 401 (RFC 6750 §3): bare when no credential was sent,
 * `invalid_token` when one was sent and refused. Every surface's grammar carries this same header.
 */
export const bearerChallenge = (p: Principal): string =>
  `Bearer realm="murmur-gateway"${p.failure === 'missing' ? '' : ', error="invalid_token"'}`;

/** Hono context key; typed accessors below so adapters need no variable typing of their own. */
const PRINCIPAL_KEY = 'principal';

export const setPrincipal = (c: Context, p: Principal): void => {
  (c as unknown as { set(k: string, v: unknown): void }).set(PRINCIPAL_KEY, p);
};

/**
 * The request's principal. A route mounted without the middleware (unit tests building one
 * adapter) is treated as open, as every surface was before auth existed.
 */
export const principalOf = (c: Context): Principal => {
  const p = (c as unknown as { get(k: string): unknown }).get(PRINCIPAL_KEY) as Principal | undefined;
  return p ?? openPrincipal('unknown');
};
