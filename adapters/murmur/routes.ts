/**
 * Thin Hono handlers of the native Murmur surface: the capsule's address (`POST /murmur/{capsule}/`,
 * with and without the slash) and the EventSource door (`GET /murmur/{capsule}/events`). Input is
 * checked here; streams are endpoints.ts's; error bodies come from errors.ts.
 */
import { a2aVersionOk, speaksA2a1, streamMethod } from '../../src/core/release-lines.js';
import type { Context, MiddlewareHandler } from 'hono';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import { GatewayError } from '../../src/errors.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import {
  JSON_CONTENT_TYPE,
  LAST_EVENT_ID_HEADER,
  LAST_EVENT_ID_QUERY,
  METHOD_WATCH,
  MURMUR_ROUTES,
} from './constants.js';
import { serveMessageStream, serveWatch, type StreamContext } from './endpoints.js';
import { murmurError, type ErrorResponse, type MurmurErrorCode } from './errors.js';
import { murmurRefusal } from './access.js';
import { principalOf } from '../../src/auth/principal.js';
import { prepareMessage } from './message.js';

/** A JSON-RPC call the gateway interprets; anything else is the capsule's to answer. */
const envelopeSchema = z
  .object({ method: z.string(), id: z.unknown().optional(), params: z.unknown().optional() })
  .loose();

/** An offset: decimal digits only. Longer than any offset is still a number (beyond the head). */
const cursorSchema = z
  .string()
  .regex(/^\d{1,20}$/)
  .transform(Number);

/** Last-Event-ID as a number, or null when absent or not a number (spec "Replay"). */
export const parseCursor = (value: string | undefined | null): number | null => {
  if (value === undefined || value === null) return null;
  const parsed = cursorSchema.safeParse(value.trim());
  return parsed.success ? parsed.data : null;
};

const rpcIdOf = (v: unknown): string | number | null =>
  typeof v === 'string' || typeof v === 'number' ? v : null;

const respond = (res: ErrorResponse): Response =>
  res.contentType === null
    ? new Response(null, { status: res.status, headers: { 'content-length': '0' } })
    : new Response(res.body, { status: res.status, headers: { 'content-type': res.contentType } });

const fail = (code: MurmurErrorCode, rpcId: string | number | null = null): Response =>
  respond(murmurError(code, rpcId));

/** The capsule writes no Date header on its event streams; neither do we, where node lets us. */
const withoutDate = (c: Context): void => {
  const outgoing = (c.env as { outgoing?: { sendDate?: boolean } } | undefined)?.outgoing;
  if (outgoing && 'sendDate' in outgoing) outgoing.sendDate = false;
};

const streamContext = (c: Context, deps: AdapterDeps, capsule: string): StreamContext => ({
  deps,
  capsule,
  c,
});

/** Build the surface's handlers. */
export const createRpcRoutes = (deps: AdapterDeps): Hono => {
  const app = new Hono();

  /** Spec "Endpoints": unknown capsule, or a POST without a JSON content type → plain 404. */
  const address: MiddlewareHandler = async (c, next) => {
    const capsule = c.req.param('capsule') ?? '';
    if (!deps.core.hasCapsule(capsule)) return fail('capsule_not_found');
    if (!JSON_CONTENT_TYPE.test(c.req.header('content-type') ?? '')) return fail('not_found');
    return next();
  };
  const limit = bodyLimit({
    maxSize: deps.config.bodyLimitBytes,
    onError: () => fail('payload_too_large'),
  });

  const rpc = async (c: Context): Promise<Response> => {
    const capsule = c.req.param('capsule') ?? '';
    const body = await c.req.text();
    if (body.length === 0) return fail('not_found');
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      return fail('parse_error');
    }
    const envelope = envelopeSchema.safeParse(json);
    const method = envelope.success ? envelope.data.method : null;
    const rpcId = envelope.success ? rpcIdOf(envelope.data.id) : null;
    const ctx = streamContext(c, deps, capsule);
    const cursor = parseCursor(c.req.header(LAST_EVENT_ID_HEADER));
    // stream/watch is a read (observe); anything forwarded or streamed from the capsule is control.
    const refused = murmurRefusal(principalOf(c), method === METHOD_WATCH ? 'observe' : 'control', capsule);
    if (refused) return refused;
    // Each capsule in its own line's dialect: a 1.0 door's names and its A2A-Version rule.
    const line = deps.core.hasCapsule(capsule) ? deps.core.releaseLine(capsule) : null;
    if (speaksA2a1(line) && !a2aVersionOk(c.req.header('a2a-version')))
      return fail('version_not_supported', rpcId);
    if (method === METHOD_WATCH) {
      withoutDate(c);
      return serveWatch(ctx, cursor ?? 0);
    }
    if (method === streamMethod(line) && envelope.success) {
      withoutDate(c);
      return serveMessageStream(ctx, prepareMessage(envelope.data, body), rpcId, cursor);
    }
    // tasks/get, tasks/cancel, message/send, unknown methods, non-objects: the capsule answers.
    try {
      const res = await deps.core.forwardRpc(capsule, body);
      return new Response(res.body, { status: res.status, headers: { 'content-type': res.contentType } });
    } catch (err) {
      // The code's fixed message only: err.message may name the capsule's internal address.
      if (err instanceof GatewayError) {
        deps.logger.warn({ err, capsule }, 'murmur: forwardRpc refused');
        return fail(err.code, rpcId);
      }
      deps.logger.error({ err, capsule }, 'murmur: forwardRpc failed');
      return fail('internal', rpcId);
    }
  };

  for (const path of [MURMUR_ROUTES.rpc, MURMUR_ROUTES.rpcNoSlash]) {
    app.post(path, address, limit, rpc);
    // Any other method on the capsule's address: the capsule's plain 404.
    app.all(path, () => fail('not_found'));
  }

  /** EventSource: the stream/watch stream; the header (sent on reconnects) wins over the query. */
  app.get(MURMUR_ROUTES.events, (c) => {
    const capsule = c.req.param('capsule');
    if (!deps.core.hasCapsule(capsule)) return fail('capsule_not_found');
    const cursor =
      parseCursor(c.req.header(LAST_EVENT_ID_HEADER)) ?? parseCursor(c.req.query(LAST_EVENT_ID_QUERY));
    withoutDate(c);
    return serveWatch(streamContext(c, deps, capsule), cursor ?? 0);
  });

  return app;
};
