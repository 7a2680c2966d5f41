/**
 * The native surface's 400 for a path segment that does not percent-decode, in the grammar of the
 * route it aimed at: the capsule's address a JSON-RPC -32600, the long-poll and records routes their
 * `{error: {code, message}}`, the EventSource door a plain status (EventSource shows no body).
 */
import type { Context } from 'hono';
import { rpcErrorResponse } from './errors.js';
import { pollErrorResponse } from './poll.js';

const MESSAGE = 'malformed percent-encoding in the path';

export const murmurMalformedPath = (c: Context): Response => {
  if (c.req.method === 'GET' && /\/(poll|records)\/?$/.test(c.req.path))
    return pollErrorResponse('bad_request', MESSAGE);
  if (c.req.method === 'POST') return rpcErrorResponse(400, -32600, 'Invalid Request');
  return new Response(null, { status: 400, headers: { 'content-length': '0' } });
};
