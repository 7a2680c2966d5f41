/**
 * The native Murmur error grammar in one table: the capsule's plain 404 for what is not a JSON-RPC
 * call on its address, else a JSON-RPC 2.0 error object. Handlers never build error bodies themselves.
 */
import type { GatewayErrorCode } from '../../src/errors.js';

export type MurmurErrorCode =
  /** Unknown capsule, no JSON content type, empty body: the capsule answers a plain 404 (spec "Endpoints"). */
  | 'not_found'
  /** The body is not JSON. The capsule's own answer is unspecified; JSON-RPC 2.0 says -32700. */
  | 'parse_error'
  /** A 1.0 capsule's call without exactly one `A2A-Version: 1.0` header: its door's -32009. */
  | 'version_not_supported'
  | GatewayErrorCode;

interface ErrorShape {
  status: number;
  /** JSON-RPC error code, or null for the plain (empty-body) answer. */
  rpcCode: number | null;
  message: string;
}

const TABLE: Record<MurmurErrorCode, ErrorShape> = {
  not_found: { status: 404, rpcCode: null, message: 'Not Found' },
  capsule_not_found: { status: 404, rpcCode: null, message: 'Not Found' },
  parse_error: { status: 200, rpcCode: -32700, message: 'Parse error' },
  version_not_supported: { status: 200, rpcCode: -32009, message: 'A2A-Version 1.0 required' },
  bad_request: { status: 200, rpcCode: -32600, message: 'Invalid Request' },
  payload_too_large: { status: 413, rpcCode: -32600, message: 'Request body too large' },
  cursor_gone: { status: 200, rpcCode: -32602, message: 'Invalid params' },
  cursor_ahead: { status: 200, rpcCode: -32602, message: 'Invalid params' },
  upstream_unreachable: { status: 502, rpcCode: -32603, message: 'capsule unreachable' },
  upstream_busy: { status: 503, rpcCode: -32603, message: 'capsule busy' },
  queue_full: { status: 429, rpcCode: -32603, message: 'submission queue full' },
  upstream_invalid: { status: 502, rpcCode: -32603, message: 'invalid capsule response' },
  upstream_method_not_found: { status: 200, rpcCode: -32601, message: 'Method not found' },
  upstream_timeout: { status: 504, rpcCode: -32603, message: 'capsule timed out' },
  store_unavailable: { status: 503, rpcCode: -32603, message: 'log store unavailable' },
  shutting_down: { status: 503, rpcCode: -32603, message: 'gateway shutting down' },
  internal: { status: 500, rpcCode: -32603, message: 'Internal error' },
};

export interface ErrorResponse {
  status: number;
  /** null: an empty body (the plain 404). */
  contentType: 'application/json' | null;
  body: string;
}

/**
 * The response for an error code, with the code's fixed message only: a core error's own message
 * (Redis, socket or capsule text, internal addresses) is for the log, never for the client.
 */
export const murmurError = (code: MurmurErrorCode, rpcId: string | number | null = null): ErrorResponse => {
  const shape = TABLE[code];
  if (shape.rpcCode === null) return { status: shape.status, contentType: null, body: '' };
  return {
    status: shape.status,
    contentType: 'application/json',
    body: rpcErrorBody(rpcId, shape.rpcCode, shape.message),
  };
};

/** The JSON-RPC 2.0 error object, the one body of this grammar. */
export const rpcErrorBody = (id: string | number | null, rpcCode: number, message: string): string =>
  JSON.stringify({ jsonrpc: '2.0', id, error: { code: rpcCode, message } });

/** A JSON-RPC error answered before a request's id was read (`id: null`): access, bounds, bad paths. */
export const rpcErrorResponse = (
  status: number,
  rpcCode: number,
  message: string,
  headers: Record<string, string> = {},
): Response =>
  new Response(rpcErrorBody(null, rpcCode, message), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
