/**
 * Credentials for the client: a Bearer token for fetch requests and, for EventSource (which cannot
 * send headers), short-lived tickets from `POST {gateway}/auth/tickets` → `{ticket, expires_at}`,
 * passed as `?ticket=`. A ticket is reused until shortly before it expires, then fetched again.
 */
import type { TokenInput } from './types.js';

const resolveToken = async (token: TokenInput | undefined): Promise<string | null> => {
  if (token === undefined) return null;
  return typeof token === 'string' ? token : await token();
};

export const authHeaders = async (token: TokenInput | undefined): Promise<Record<string, string>> => {
  const value = await resolveToken(token);
  return value ? { authorization: `Bearer ${value}` } : {};
};

/** An HTTP failure with what a retry needs to know. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    /** `Retry-After` in milliseconds, when the response had one. */
    readonly retryAfterMs: number | null,
    message: string,
  ) {
    super(message);
  }
}

/** `Retry-After` as seconds or an HTTP date, in milliseconds from now. */
export const retryAfterMs = (value: string | null): number | null => {
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
};

export const httpError = async (res: Response, what: string): Promise<HttpError> => {
  let detail = '';
  try {
    detail = (await res.text()).slice(0, 200);
  } catch {
    // the body is only for the message
  }
  return new HttpError(
    res.status,
    retryAfterMs(res.headers.get('retry-after')),
    `${what}: ${res.status} ${detail}`,
  );
};

export interface Ticket {
  ticket: string;
  /** Epoch milliseconds. */
  expiresAt: number;
  /** Refresh once fewer than this many milliseconds are left. */
  marginMs: number;
}

/**
 * Refresh this long before expiry (or at half the ticket's life, when it is short), so a URL built
 * now is still valid when the request lands.
 */
const REFRESH_MARGIN_MS = 10_000;

export class TicketSource {
  private current: Ticket | null = null;
  private pending: Promise<Ticket> | null = null;

  constructor(
    private readonly gateway: string,
    private readonly token: TokenInput,
  ) {}

  /** A ticket valid for at least a few more seconds (one request in flight at a time). */
  async get(): Promise<string> {
    return (await this.take()).ticket;
  }

  /**
   * A ticket, and whether it was fetched for this call (`fresh`) or reused. A refused reused ticket
   * may just be stale (clock skew, a restarted gateway with a new signing key): worth one more try
   * with a fresh one. A refused fresh ticket is not.
   */
  async take(): Promise<{ ticket: string; fresh: boolean }> {
    const held = this.current;
    if (held && held.expiresAt - Date.now() > held.marginMs) return { ticket: held.ticket, fresh: false };
    this.pending ??= this.fetchTicket().finally(() => {
      this.pending = null;
    });
    const got = await this.pending;
    this.current = got;
    return { ticket: got.ticket, fresh: true };
  }

  /** Forget the ticket (the gateway refused it, or a stream failed with it): the next take() fetches. */
  invalidate(): void {
    this.current = null;
  }

  private async fetchTicket(): Promise<Ticket> {
    const res = await fetch(new URL('/auth/tickets', this.gateway), {
      method: 'POST',
      headers: { ...(await authHeaders(this.token)), 'content-type': 'application/json' },
      body: '{}',
    });
    if (!res.ok) throw await httpError(res, 'ticket');
    const body = (await res.json()) as { ticket?: unknown; expires_at?: unknown };
    if (typeof body.ticket !== 'string') throw new Error('ticket: no ticket in the answer');
    const expires =
      typeof body.expires_at === 'number'
        ? body.expires_at < 1e12
          ? body.expires_at * 1000 // seconds since the epoch
          : body.expires_at
        : typeof body.expires_at === 'string'
          ? Date.parse(body.expires_at)
          : NaN;
    // Without a readable expiry, assume a minute (and refresh after 50 s).
    const expiresAt = Number.isNaN(expires) ? Date.now() + 60_000 : expires;
    const marginMs = Math.min(REFRESH_MARGIN_MS, Math.max(0, (expiresAt - Date.now()) / 2));
    return { ticket: body.ticket, expiresAt, marginMs };
  }
}
