/**
 * Request plumbing shared by the BeeOS handlers: request ids, the error envelope answer, JSON body
 * and query parsing with zod into the contract's error codes, and the auth → agent → ACL guards.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import type { Logger } from 'pino';
import { z } from 'zod';
import { GatewayError } from '../../src/errors.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';
import { may, principalOf, seesCapsule, type Principal } from '../../src/auth/principal.js';
import type { Channel, ChannelRegistry } from './channels.js';
import {
  HEADER_AUTHORIZATION,
  HEADER_LAST_EVENT_ID,
  HEADER_REQUEST_ID,
  MESSAGES_DEFAULT_LIMIT,
  MESSAGES_MAX_LIMIT,
  QUERY_INCLUDE_DELTAS,
  QUERY_LIMIT,
  QUERY_SINCE,
} from './constants.js';
import { BeeosError, ERROR_TABLE, errorBody, toBeeosError } from './errors.js';

/** `logger` (set by index.ts): where a core error's internal detail goes instead of the response. */
export type Env = { Variables: { requestId: string; logger?: Logger } };

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's X-Request-Id when well-formed, else a fresh one. */
export const requestIdOf = (c: Context): string => {
  const given = c.req.header(HEADER_REQUEST_ID);
  return given && REQUEST_ID.test(given) ? given : `req_${randomUUID()}`;
};

export const errorResponse = (c: Context<Env>, err: unknown): Response => {
  const e = toBeeosError(err);
  const rid = c.get('requestId') ?? requestIdOf(c);
  if (!(err instanceof BeeosError) && !(err instanceof GatewayError)) countUnexpected('request');
  if (!(err instanceof BeeosError))
    c.get('logger')?.[err instanceof GatewayError ? 'warn' : 'error'](
      { err, path: c.req.path, requestId: rid },
      'beeos: request failed',
    );
  const headers: Record<string, string> = { [HEADER_REQUEST_ID]: rid };
  // A full submission queue: the contract's `rate_limited`, with when to try again.
  const retryAfter = err instanceof GatewayError ? err.details?.retryAfterSeconds : undefined;
  if (typeof retryAfter === 'number') headers['Retry-After'] = String(retryAfter);
  return c.json(errorBody(e, rid), ERROR_TABLE[e.code].status as 400, headers);
};

/** Wrap a handler so every thrown error becomes the error envelope (whatever app mounts us). */
export const handle =
  (fn: (c: Context<Env>) => Promise<Response>) =>
  async (c: Context<Env>): Promise<Response> => {
    try {
      return await fn(c);
    } catch (err) {
      return errorResponse(c, err);
    }
  };

/** A `message` given as a string, or as `{text}` / `{content}` (the OpenAPI form). */
const messageSchema = z.union([
  z.string().min(1),
  z.object({ text: z.string().min(1) }).transform((m) => m.text),
  z.object({ content: z.string().min(1) }).transform((m) => m.content),
]);

export const messageBodySchema = z.object({
  message: messageSchema,
  context_id: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/)
    .optional(),
  idempotency_key: z.string().min(1).max(256).optional(),
  metadata: z.unknown().optional(),
});

export const conversationBodySchema = z.object({ metadata: z.unknown().optional() });

/** Parse a JSON object body: invalid_json / invalid_body / missing_param (BeeOS's error reference). */
export const parseBody = async <S extends z.ZodType>(
  c: Context<Env>,
  schema: S,
  opts: { required?: string[]; allowEmpty?: boolean } = {},
): Promise<z.output<S>> => {
  const type = c.req.header('Content-Type');
  const text = await c.req.text();
  if (text.trim() === '' && opts.allowEmpty) return schema.parse({});
  if (type && !/json/i.test(type))
    throw new BeeosError('invalid_body', 'Content-Type must be application/json');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new BeeosError('invalid_json', 'request body is not valid JSON');
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new BeeosError('invalid_body', 'request body must be a JSON object');
  for (const field of opts.required ?? []) {
    const v = (raw as Record<string, unknown>)[field];
    if (v === undefined || v === null || v === '')
      throw new BeeosError('missing_param', `missing required parameter: ${field}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.') || 'body';
    throw new BeeosError('invalid_body', `invalid field: ${where}`);
  }
  return parsed.data;
};

const uint = z
  .string()
  .regex(/^\d{1,16}$/)
  .transform(Number)
  .refine((n) => Number.isSafeInteger(n));

/** `since` from the query, else `Last-Event-ID` (alias), else 0. */
export const parseSince = (c: Context): number => {
  const raw = c.req.query(QUERY_SINCE) ?? c.req.header(HEADER_LAST_EVENT_ID);
  if (raw === undefined || raw === '') return 0;
  const r = uint.safeParse(raw.trim());
  if (!r.success) throw new BeeosError('invalid_param', 'since must be a non-negative integer offset');
  return r.data;
};

export const parseLimit = (c: Context): number => {
  const raw = c.req.query(QUERY_LIMIT);
  if (raw === undefined) return MESSAGES_DEFAULT_LIMIT;
  const r = uint.safeParse(raw);
  if (!r.success || r.data < 1) throw new BeeosError('invalid_param', 'limit must be a positive integer');
  return Math.min(r.data, MESSAGES_MAX_LIMIT);
};

/** `GET …/conversations` page size (the BeeOS OpenAPI: 1 to 100). */
const CONVERSATIONS_DEFAULT_LIMIT = 50;
const CONVERSATIONS_MAX_LIMIT = 100;
const CONVERSATION_STATES = ['active', 'open', 'closed', 'all'] as const;

/**
 * `GET …/conversations` query: `state` (`active`, its alias `open`, `closed`, `all`; default
 * active), `since` (a previous page's `next_since`), `limit` (1 to 100).
 */
export const parseConversationList = (
  c: Context,
): { state: 'active' | 'closed' | 'all'; after: number; limit: number } => {
  const rawState = c.req.query('state') ?? 'active';
  const state = CONVERSATION_STATES.find((s) => s === rawState);
  if (!state) throw new BeeosError('invalid_param', 'state must be active, open, closed or all');
  const rawSince = c.req.query(QUERY_SINCE);
  const since =
    rawSince === undefined || rawSince === ''
      ? { success: true as const, data: 0 }
      : uint.safeParse(rawSince);
  if (!since.success) throw new BeeosError('invalid_param', 'since must be a next_since of a previous page');
  const rawLimit = c.req.query(QUERY_LIMIT);
  const limit =
    rawLimit === undefined
      ? { success: true as const, data: CONVERSATIONS_DEFAULT_LIMIT }
      : uint.safeParse(rawLimit);
  if (!limit.success || limit.data < 1 || limit.data > CONVERSATIONS_MAX_LIMIT)
    throw new BeeosError('invalid_param', `limit must be an integer from 1 to ${CONVERSATIONS_MAX_LIMIT}`);
  return { state: state === 'open' ? 'active' : state, after: since.data, limit: limit.data };
};

export const parseIncludeDeltas = (c: Context): boolean => {
  const raw = c.req.query(QUERY_INCLUDE_DELTAS);
  if (raw === undefined || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw new BeeosError('invalid_param', 'include_deltas must be true or false');
};

/**
 * The caller (resolved by the gateway's auth middleware), then the agent (capsule) must exist and be
 * one the credential may use (404 otherwise: a key limited to other capsules learns nothing), then
 * the `submit` scope. Returns the caller's owner and principal.
 */
export const guardAgent = (
  deps: AdapterDeps,
  c: Context<Env>,
): { owner: string; agent: string; principal: Principal } => {
  const principal = principalOf(c);
  if (principal.kind === 'anonymous') {
    if (principal.failure === 'missing' && !c.req.header(HEADER_AUTHORIZATION))
      throw new BeeosError('missing_token', 'missing Authorization bearer token');
    throw new BeeosError('invalid_token', 'invalid or expired credential');
  }
  const agent = c.req.param('agent') ?? '';
  if (!deps.core.hasCapsule(agent) || !seesCapsule(principal, agent))
    throw new BeeosError('agent_not_found', `agent not found: ${agent}`);
  if (!may(principal, 'submit', agent))
    throw new BeeosError('forbidden', 'this credential lacks the "submit" scope');
  return { owner: principal.owner, agent, principal };
};

/**
 * The channel of kind `kind` named by `:id`, owned by `owner`: another owner's is 404 like an
 * unknown one (a 403 would confirm it exists).
 */
export const guardChannel = async (
  registry: ChannelRegistry,
  agent: string,
  id: string,
  kind: Channel['kind'],
  owner: string,
): Promise<Channel> => {
  const channel = await registry.get(agent, id, owner);
  if (!channel || channel.kind !== kind) throw new BeeosError('agent_not_found', `${kind} not found: ${id}`);
  if (channel.owner !== owner) throw new BeeosError('agent_not_found', `${kind} not found: ${id}`);
  if (channel.pending) await channel.pending.catch(() => undefined);
  return channel;
};
