/**
 * Tickets for browsers (EventSource cannot send headers): `POST /auth/tickets` with a Bearer
 * credential returns an HMAC-SHA256-signed, short-lived token bound to the caller's owner, scopes,
 * capsules and key id, accepted as `?ticket=` on GET streams and long-polls only. The signing key is
 * shared by every replica (config `auth.ticketSecret`, else one random key kept in the store), so a
 * ticket issued by one replica is accepted by all. Format: `t1.<base64url JSON>.<base64url HMAC>`.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SCOPES, type Principal, type Scope } from './principal.js';
import type { TicketVerifier } from './authenticator.js';

/** Store key of the shared signing key when none is configured. */
const TICKET_KEY_NAME = 'mg:auth:ticket-key';

const VERSION = 't1';

interface TicketBody {
  /** owner */ o: string;
  /** scopes */ s: Scope[];
  /** capsules, or '*' */ c: string[] | '*';
  /** key id of the credential that asked */ k: string | null;
  /** expiry, epoch ms */ e: number;
  /** nonce: two tickets issued in one millisecond still differ */ n: string;
  /** the credential's general-stream grants (apiKeys[].streams), when it has any */ g?: string[];
}

export interface TicketAuthority extends TicketVerifier {
  readonly ttlMs: number;
  issue(p: Principal, nowMs?: number): Promise<{ ticket: string; expiresAt: number }>;
}

const b64 = (b: Buffer): string => b.toString('base64url');

/**
 * `secret`: the key, or how to get it (asked once, again only after a failure: the store may be
 * away at start).
 */
export const createTicketAuthority = (
  secret: string | (() => Promise<string>),
  ttlMs: number,
): TicketAuthority => {
  let key: Promise<Buffer> | null = null;
  const keyOf = (): Promise<Buffer> => {
    key ??= (typeof secret === 'string' ? Promise.resolve(secret) : secret()).then(
      (s) => Buffer.from(s, 'utf8'),
      (err: unknown) => {
        key = null;
        throw err;
      },
    );
    return key;
  };
  const sign = async (payload: string): Promise<Buffer> =>
    createHmac('sha256', await keyOf())
      .update(`${VERSION}.${payload}`)
      .digest();
  return {
    ttlMs,
    async issue(p, nowMs = Date.now()) {
      const body: TicketBody = {
        o: p.owner,
        s: [...p.scopes],
        c: p.capsules === '*' ? '*' : [...p.capsules],
        k: p.keyId,
        e: nowMs + ttlMs,
        n: b64(randomBytes(6)),
        ...(p.streams && p.streams.length > 0 ? { g: [...p.streams] } : {}),
      };
      const payload = b64(Buffer.from(JSON.stringify(body), 'utf8'));
      return { ticket: `${VERSION}.${payload}.${b64(await sign(payload))}`, expiresAt: body.e };
    },
    async verify(ticket, ip) {
      const parts = ticket.split('.');
      if (parts.length !== 3 || parts[0] !== VERSION) return 'invalid';
      const [, payload = '', mac = ''] = parts;
      // Compared as text, not decoded: base64url decoding ignores a last character's spare bits, so
      // one signature has several spellings; only the canonical one is the ticket that was issued.
      const presented = Buffer.from(mac, 'utf8');
      let expected: Buffer;
      try {
        expected = Buffer.from(b64(await sign(payload)), 'utf8');
      } catch {
        // No signing key (the store is away): the ticket cannot be checked, so it does not count.
        return 'invalid';
      }
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return 'invalid';
      let body: TicketBody;
      try {
        body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as TicketBody;
      } catch {
        return 'invalid';
      }
      if (typeof body.e !== 'number' || typeof body.o !== 'string' || !Array.isArray(body.s))
        return 'invalid';
      if (Date.now() >= body.e) return 'expired';
      return {
        kind: 'ticket',
        owner: body.o,
        scopes: new Set(body.s.filter((s): s is Scope => (SCOPES as readonly string[]).includes(s))),
        capsules: body.c === '*' ? '*' : new Set(body.c),
        keyId: body.k,
        ip,
        ...(Array.isArray(body.g) ? { streams: body.g.filter((g) => typeof g === 'string') } : {}),
      };
    },
  };
};

/** The ticket secret: configured, else shared through the store, else this process's own. */
export const ticketSecretSource =
  (
    configured: string | undefined,
    store: { sharedSecret?(name: string, candidate: string): Promise<string> },
  ): (() => Promise<string>) =>
  async () => {
    if (configured) return configured;
    const candidate = randomBytes(32).toString('hex');
    return store.sharedSecret ? store.sharedSecret(TICKET_KEY_NAME, candidate) : candidate;
  };
