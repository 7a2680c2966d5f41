/**
 * `/v1/stream/__ds/subscriptions/…` and `/v1/stream/__ds/jwks.json`: the protocol's subscriptions
 * (PROTOCOL.md §6–7), on when the general streams are (`durableStreams.writable`). The control
 * calls (create/confirm, read, delete, link and unlink streams, claim) need the same scopes as the
 * streams and act in the caller's namespace: another owner's subscription is the 404 of a missing
 * one, and the streams a subscription names are the caller's (stream-owner.ts). Callbacks, acks
 * and releases are authorised by the wake's callback token alone (`Authorization: Bearer`), which
 * names one subscription and one wake. Errors are the protocol's: `{"error":{"code","message"}}`
 * with upper-case codes. The work is src/subscriptions; this file only translates HTTP.
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { principalOf } from '../../src/auth/principal.js';
import { checkReceiverUrl } from '../../src/webhooks/receiver-url.js';
import type { Outcome, SubscriptionError } from '../../src/subscriptions/control.js';
import type { Subscriptions } from '../../src/subscriptions/manager.js';
import { SECURITY_HEADERS } from './stream-errors.js';
import { streamRefusal } from './stream-access.js';
import { placeOf } from './stream-owner.js';
import {
  parseAck,
  parseClaim,
  parseRelease,
  parseStreamsBody,
  parseSubscription,
  validSubscriptionId,
} from './subscription-input.js';
import { validStreamPath } from './stream-path.js';

const STATUS: Record<
  SubscriptionError | 'INVALID_REQUEST' | 'WEBHOOK_URL_REJECTED' | 'PAYLOAD_TOO_LARGE',
  number
> = {
  INVALID_REQUEST: 400,
  WEBHOOK_URL_REJECTED: 400,
  TOKEN_INVALID: 401,
  TOKEN_EXPIRED: 401,
  SUBSCRIPTION_NOT_FOUND: 404,
  SUBSCRIPTION_ALREADY_EXISTS: 409,
  NO_PENDING_WORK: 409,
  ALREADY_CLAIMED: 409,
  FENCED: 409,
  INVALID_OFFSET: 409,
  PAYLOAD_TOO_LARGE: 413,
  TOO_MANY_WAKES: 429,
  TOO_MANY_SUBSCRIPTIONS: 507,
};

type Code = keyof typeof STATUS;

/** Control bodies are small: 256 KiB is room for a thousand stream paths. */
const MAX_CONTROL_BODY = 256 * 1024;

const problem = (c: Context, code: Code, message: string, extra: Record<string, unknown> = {}): Response =>
  c.body(JSON.stringify({ error: { code, message, ...extra } }), STATUS[code] as 400, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...SECURITY_HEADERS,
  });

const json = (c: Context, status: 200 | 201, body: unknown): Response =>
  c.body(JSON.stringify(body), status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...SECURITY_HEADERS,
  });

const refused = (c: Context, outcome: Extract<Outcome<unknown>, { ok: false }>): Response =>
  problem(
    c,
    outcome.code,
    outcome.message,
    outcome.holder !== undefined ? { current_holder: outcome.holder } : {},
  );

const PREFIX = '/v1/stream/__ds';
const SUB = `${PREFIX}/subscriptions/:id`;

/** The caller's namespace: its owner's tag, or null without auth (one shared namespace). */
const ownerOf = (c: Context): string | null => placeOf(principalOf(c), 'x').owner;
const resolverOf =
  (c: Context) =>
  (path: string): string =>
    placeOf(principalOf(c), path).storePath;

const bearerOf = (c: Context): string | null => {
  const m = /^Bearer\s+(\S+)$/i.exec(c.req.header('authorization') ?? '');
  return m ? m[1]! : null;
};

export const createSubscriptionRoutes = (deps: AdapterDeps): Hono => {
  const app = new Hono();
  const subs: Subscriptions | undefined = deps.subscriptions;
  if (!deps.config.durableStreams?.writable || !subs) return app;
  const policy = deps.config.webhooks ?? { allowLoopback: false, allowHosts: [] };
  const limit = bodyLimit({
    maxSize: MAX_CONTROL_BODY,
    onError: (c) => problem(c, 'PAYLOAD_TOO_LARGE', `request body exceeds ${MAX_CONTROL_BODY} bytes`),
  });
  const baseUrlOf = (c: Context): string =>
    deps.config.publicUrl?.replace(/\/$/, '') ?? new URL(c.req.url).origin;

  app.get(`${PREFIX}/jwks.json`, async (c) =>
    c.body(JSON.stringify(await subs.jwks()), 200, {
      'content-type': 'application/jwk-set+json',
      'cache-control': 'public, max-age=300',
      ...SECURITY_HEADERS,
    }),
  );

  // The id first, then who may use the control API at all (callbacks carry their own token).
  app.use(`${SUB}/*`, async (c, next) => {
    if (!validSubscriptionId(c.req.param('id') ?? ''))
      return problem(c, 'SUBSCRIPTION_NOT_FOUND', 'no such subscription');
    await next();
  });
  app.use(SUB, async (c, next) => {
    if (!validSubscriptionId(c.req.param('id') ?? ''))
      return problem(c, 'SUBSCRIPTION_NOT_FOUND', 'no such subscription');
    return (streamRefusal(c) ?? (await next())) as Response;
  });
  for (const tail of ['/streams', '/streams/*', '/claim']) {
    app.use(`${SUB}${tail}`, async (c, next) => (streamRefusal(c) ?? (await next())) as Response);
  }

  app.put(SUB, limit, async (c) => {
    const parsed = parseSubscription(await c.req.text());
    if (!parsed.ok) return problem(c, 'INVALID_REQUEST', parsed.message);
    const req = parsed.value;
    if (req.webhookUrl !== null) {
      const url = checkReceiverUrl(req.webhookUrl, policy);
      if (!url.ok) return problem(c, 'WEBHOOK_URL_REJECTED', url.reason);
    }
    const outcome = await subs.create(ownerOf(c), c.req.param('id'), req, baseUrlOf(c), resolverOf(c));
    if (!outcome.ok) return refused(c, outcome);
    return json(c, outcome.value.created ? 201 : 200, outcome.value.view);
  });

  app.get(SUB, async (c) => {
    const outcome = await subs.view(ownerOf(c), c.req.param('id'));
    return outcome.ok ? json(c, 200, outcome.value) : refused(c, outcome);
  });

  app.delete(SUB, async (c) => {
    const outcome = await subs.remove(ownerOf(c), c.req.param('id'));
    return outcome.ok ? c.body(null, 204, SECURITY_HEADERS) : refused(c, outcome);
  });

  app.post(`${SUB}/streams`, limit, async (c) => {
    const parsed = parseStreamsBody(await c.req.text());
    if (!parsed.ok) return problem(c, 'INVALID_REQUEST', parsed.message);
    const outcome = await subs.addStreams(ownerOf(c), c.req.param('id'), parsed.value, resolverOf(c));
    return outcome.ok ? c.body(null, 204, SECURITY_HEADERS) : refused(c, outcome);
  });

  app.delete(`${SUB}/streams/:path{.+}`, async (c) => {
    const path = c.req.param('path');
    if (!validStreamPath(path)) return problem(c, 'INVALID_REQUEST', 'not a stream path');
    const outcome = await subs.removeStream(ownerOf(c), c.req.param('id'), path);
    return outcome.ok ? c.body(null, 204, SECURITY_HEADERS) : refused(c, outcome);
  });

  app.post(`${SUB}/claim`, limit, async (c) => {
    const parsed = parseClaim(await c.req.text());
    if (!parsed.ok) return problem(c, 'INVALID_REQUEST', parsed.message);
    const outcome = await subs.claim(ownerOf(c), c.req.param('id'), parsed.value);
    return outcome.ok ? json(c, 200, outcome.value) : refused(c, outcome);
  });

  /** Callback (webhook) and ack (pull-wake): one operation, fenced by the wake the token names. */
  const ack = async (c: Context): Promise<Response> => {
    const token = bearerOf(c);
    if (token === null)
      return problem(c, 'TOKEN_INVALID', 'a callback token is required (Authorization: Bearer)');
    const parsed = parseAck(await c.req.text());
    if (!parsed.ok) return problem(c, 'INVALID_REQUEST', parsed.message);
    const outcome = await subs.ack(ownerFromToken(c), c.req.param('id') ?? '', token, parsed.value);
    return outcome.ok ? json(c, 200, { ok: true, next_wake: outcome.value.next_wake }) : refused(c, outcome);
  };
  app.post(`${SUB}/callback`, limit, ack);
  app.post(`${SUB}/ack`, limit, ack);

  app.post(`${SUB}/release`, limit, async (c) => {
    const token = bearerOf(c);
    if (token === null)
      return problem(c, 'TOKEN_INVALID', 'a callback token is required (Authorization: Bearer)');
    const parsed = parseRelease(await c.req.text());
    if (!parsed.ok) return problem(c, 'INVALID_REQUEST', parsed.message);
    const outcome = await subs.release(
      ownerFromToken(c),
      c.req.param('id') ?? '',
      token,
      parsed.value.wakeId,
      parsed.value.generation,
    );
    return outcome.ok ? c.body(null, 204, SECURITY_HEADERS) : refused(c, outcome);
  });

  app.all(`${PREFIX}/jwks.json`, (c) => methodNotAllowed(c, 'GET'));
  app.all(SUB, (c) => methodNotAllowed(c, 'GET, PUT, DELETE'));
  app.all(`${SUB}/*`, (c) => methodNotAllowed(c, 'POST, DELETE'));
  return app;
};

/**
 * A callback's caller is the receiver, not the subscriber: its gateway credentials (if any) say
 * nothing. The token names the subscription's store key, owner included; the manager checks it
 * against the key built here, so the owner is taken from the token's subject.
 */
const ownerFromToken = (c: Context): string | null => {
  const token = bearerOf(c);
  const payload = token?.split('.')[1];
  try {
    const sub = (JSON.parse(Buffer.from(payload ?? '', 'base64url').toString('utf8')) as { sub?: unknown })
      .sub;
    if (typeof sub === 'string' && sub.includes('|')) {
      const owner = sub.slice(0, sub.indexOf('|'));
      return owner === '' ? null : owner;
    }
  } catch {
    // Unreadable: the manager's verification refuses it.
  }
  return null;
};

const methodNotAllowed = (c: Context, allow: string): Response =>
  c.body(
    JSON.stringify({
      error: { code: 'METHOD_NOT_ALLOWED', message: `${c.req.method} is not part of the protocol` },
    }),
    405,
    {
      'content-type': 'application/json; charset=utf-8',
      allow,
      ...SECURITY_HEADERS,
    },
  );
