/**
 * Bearer JWTs via `jose`: HS256 with a shared secret, or RS256/ES256/EdDSA with a PEM public key or a
 * JWKS file. Issuer, audience, exp and nbf are enforced. Claims: sub → owner, scope (space-separated)
 * → scopes (default submit), capsules (array or space-separated string) → capsules (default all).
 */
import { readFileSync } from 'node:fs';
import { createLocalJWKSet, errors, importSPKI, jwtVerify, type JWTPayload } from 'jose';
import type { JwtConfig } from '../config/schema.js';
import type { JwtVerifier } from './authenticator.js';
import { SCOPES, type Scope } from './principal.js';

type Key = Parameters<typeof jwtVerify>[1];

const ASYMMETRIC = ['RS256', 'ES256', 'EdDSA'];

export const createJwtVerifier = async (config: JwtConfig): Promise<JwtVerifier> => {
  let key: Key;
  let algorithms: string[];
  if (config.secret !== undefined) {
    key = new TextEncoder().encode(config.secret);
    algorithms = config.algorithms ?? ['HS256'];
  } else if (config.publicKey !== undefined) {
    const pem = config.publicKey;
    // importSPKI needs the algorithm: the first one (allowed) that fits the key's type.
    const candidates = config.algorithms ?? ASYMMETRIC;
    let imported: { alg: string; key: Awaited<ReturnType<typeof importSPKI>> } | null = null;
    for (const alg of candidates) {
      try {
        imported = { alg, key: await importSPKI(pem, alg) };
        break;
      } catch {
        // not this algorithm's key type
      }
    }
    if (!imported) throw new Error('jwt.publicKey: not a PEM public key for RS256, ES256 or EdDSA');
    key = imported.key;
    algorithms = [imported.alg];
  } else {
    const jwks = JSON.parse(readFileSync(config.jwksFile!, 'utf8')) as Parameters<
      typeof createLocalJWKSet
    >[0];
    key = createLocalJWKSet(jwks) as unknown as Key;
    algorithms = config.algorithms ?? ASYMMETRIC;
  }
  return {
    async verify(token, ip) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, key as never, {
          issuer: config.issuer,
          audience: config.audience,
          algorithms,
        }));
      } catch (err) {
        return err instanceof errors.JWTExpired ? 'expired' : 'invalid';
      }
      if (typeof payload.sub !== 'string' || payload.sub === '') return 'invalid';
      const scopeClaim =
        typeof payload.scope === 'string' ? payload.scope.split(/\s+/).filter(Boolean) : null;
      const scopes = (scopeClaim ?? ['submit']).filter((s): s is Scope =>
        (SCOPES as readonly string[]).includes(s),
      );
      const raw = payload.capsules;
      const list = Array.isArray(raw)
        ? raw.filter((c): c is string => typeof c === 'string')
        : typeof raw === 'string'
          ? raw.split(/\s+/).filter(Boolean)
          : ['*'];
      return {
        kind: 'jwt',
        owner: payload.sub,
        scopes: new Set(scopes),
        capsules: list.includes('*') ? '*' : new Set(list),
        keyId: `jwt:${payload.sub}`.slice(0, 64),
        ip,
      };
    },
  };
};
