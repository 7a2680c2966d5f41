/**
 * The native surface's 429 for the gateway's abuse bounds, in the grammar of the route: the capsule's
 * address answers a JSON-RPC error (-32000, server-defined), the long-poll and records routes their
 * `{error: {code, message}}`, the EventSource door a plain status (EventSource shows no body).
 */
import type { Context } from 'hono';
import { rpcErrorResponse } from './errors.js';

export const murmurRateLimited = (c: Context, retryAfterSeconds: number): Response => {
  const retry = { 'Retry-After': String(retryAfterSeconds) };
  const path = c.req.path;
  if (c.req.method === 'GET' && /\/(poll|records)\/?$/.test(path))
    return new Response(
      JSON.stringify({ error: { code: 'rate_limited', message: 'too many requests, retry later' } }),
      { status: 429, headers: { 'content-type': 'application/json', ...retry } },
    );
  if (c.req.method === 'POST') return rpcErrorResponse(429, -32000, 'Rate limited', retry);
  return new Response(null, { status: 429, headers: { 'content-length': '0', ...retry } });
};
