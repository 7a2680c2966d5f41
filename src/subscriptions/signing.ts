/**
 * Webhook signing (PROTOCOL.md §7): every delivery carries `Webhook-Signature: t=<unix s>,kid=<kid>,
 * ed25519=<base64url>` over `<t>.<raw body>`, verifiable with the keys the gateway publishes as a
 * JWKS. No shared secrets. The kid is derived from the key (`ds_` + a hash of it), so it is stable.
 * Callback tokens are HS256 JWTs (jose) naming the subscription and its wake. The ring is kept in
 * the subscription store, generated once, so every replica and every restart signs alike; a
 * rotated key stays published through the replay window.
 */
import { createHash, createPrivateKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import type { KeyRing, SigningKey } from './types.js';

const kidOf = (x: string): string =>
  `ds_${createHash('sha256').update(x, 'utf8').digest('base64url').slice(0, 22)}`;

const newSigningKey = (nowMs = Date.now()): SigningKey => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const pub = publicKey.export({ format: 'jwk' }) as Record<string, string>;
  const priv = privateKey.export({ format: 'jwk' }) as Record<string, string>;
  const kid = kidOf(pub.x!);
  return {
    kid,
    publicJwk: { ...pub, kid, alg: 'EdDSA', use: 'sig' },
    privateJwk: priv,
    createdAt: nowMs,
    retiredAt: null,
  };
};

export const freshKeyRing = (): KeyRing => ({
  keys: [newSigningKey()],
  tokenSecret: randomBytes(32).toString('base64url'),
});

/** The key new deliveries are signed with: the newest not rotated out. */
export const currentKey = (ring: KeyRing): SigningKey => {
  const live = ring.keys.filter((k) => k.retiredAt === null);
  return live[live.length - 1] ?? ring.keys[ring.keys.length - 1]!;
};

/** A new current key; old ones kept while a verifier may still replay what they signed. */
export const rotated = (ring: KeyRing, replayWindowMs: number, nowMs = Date.now()): KeyRing => ({
  tokenSecret: ring.tokenSecret,
  keys: [
    ...ring.keys
      .filter((k) => k.retiredAt === null || k.retiredAt + replayWindowMs > nowMs)
      .map((k) => (k.retiredAt === null ? { ...k, retiredAt: nowMs } : k)),
    newSigningKey(nowMs),
  ],
});

/** The JWKS: every key still inside its replay window. */
export const jwksOf = (
  ring: KeyRing,
  replayWindowMs: number,
  nowMs = Date.now(),
): { keys: Record<string, string>[] } => ({
  keys: ring.keys
    .filter((k) => k.retiredAt === null || k.retiredAt + replayWindowMs > nowMs)
    .map((k) => k.publicJwk),
});

/** The `Webhook-Signature` value for `body` sent at `nowMs`. */
export const signatureHeader = (ring: KeyRing, body: string, nowMs = Date.now()): string => {
  const key = currentKey(ring);
  const t = Math.floor(nowMs / 1000);
  const privateKey = createPrivateKey({ key: key.privateJwk, format: 'jwk' });
  const sig = sign(null, Buffer.from(`${t}.${body}`, 'utf8'), privateKey).toString('base64url');
  return `t=${t},kid=${key.kid},ed25519=${sig}`;
};

export interface TokenClaims {
  /** The subscription's store key. */
  sub: string;
  wakeId: string;
  generation: number;
}

const secretOf = (ring: KeyRing): Uint8Array => Buffer.from(ring.tokenSecret, 'base64url');

export const callbackToken = async (
  ring: KeyRing,
  claims: TokenClaims,
  ttlSeconds: number,
): Promise<string> =>
  new SignJWT({ wid: claims.wakeId, gen: claims.generation })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(claims.sub)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(secretOf(ring));

export type TokenCheck =
  { ok: true; claims: TokenClaims } | { ok: false; code: 'TOKEN_INVALID' | 'TOKEN_EXPIRED' };

export const verifyCallbackToken = async (ring: KeyRing, token: string): Promise<TokenCheck> => {
  try {
    const { payload } = await jwtVerify(token, secretOf(ring), { algorithms: ['HS256'] });
    if (typeof payload.sub !== 'string' || typeof payload.wid !== 'string' || typeof payload.gen !== 'number')
      return { ok: false, code: 'TOKEN_INVALID' };
    return { ok: true, claims: { sub: payload.sub, wakeId: payload.wid, generation: payload.gen } };
  } catch (err) {
    return {
      ok: false,
      code: (err as { code?: string }).code === 'ERR_JWT_EXPIRED' ? 'TOKEN_EXPIRED' : 'TOKEN_INVALID',
    };
  }
};
