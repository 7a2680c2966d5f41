/**
 * JSON-RPC errors in A2A's grammar (spec §5.4, notes A3). Everything before a stream starts is a
 * JSON body; a status other than 200 only where HTTP itself should act on it (auth, an unknown
 * capsule, a full queue with Retry-After, an unreachable capsule, a body too large).
 */
import { GatewayError } from '../../src/errors.js';

export type RpcId = string | number | null;

export const CODE = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** Implementation-defined server error: auth, unknown capsule, a full queue. */
  server: -32000,
  taskNotFound: -32001,
  taskNotCancelable: -32002,
  pushNotificationNotSupported: -32003,
  unsupportedOperation: -32004,
  contentTypeNotSupported: -32005,
  extendedAgentCardNotConfigured: -32007,
  versionNotSupported: -32009,
} as const;

export class A2aError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly status = 200,
    readonly headers: Record<string, string> = {},
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'A2aError';
  }
}

export const errorBody = (id: RpcId, e: A2aError): string =>
  JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: { code: e.code, message: e.message, ...(e.data ? { data: e.data } : {}) },
  });

export const errorResponse = (id: RpcId, e: A2aError): Response =>
  new Response(errorBody(id, e), {
    status: e.status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...e.headers },
  });

export const taskNotFound = (): A2aError => new A2aError(CODE.taskNotFound, 'Task not found');
export const capsuleNotFound = (): A2aError => new A2aError(CODE.server, 'capsule not found', 404);
export const pushNotSupported = (): A2aError =>
  new A2aError(CODE.pushNotificationNotSupported, 'Push notifications are not supported');
export const invalidParams = (message: string): A2aError => new A2aError(CODE.invalidParams, message);

/** A core error in this grammar. */
export const fromCoreError = (err: unknown): A2aError => {
  if (err instanceof A2aError) return err;
  if (err instanceof GatewayError) {
    switch (err.code) {
      case 'capsule_not_found':
        return capsuleNotFound();
      case 'queue_full': {
        const after = Number(err.details?.retryAfterSeconds ?? 1);
        return new A2aError(
          CODE.server,
          err.message,
          429,
          {
            'retry-after': String(after),
          },
          { retryAfterSeconds: after },
        );
      }
      case 'upstream_unreachable':
      case 'upstream_timeout':
      case 'store_unavailable':
      case 'shutting_down':
        return new A2aError(CODE.internal, err.message, 503, { 'retry-after': '1' });
      case 'bad_request':
        return invalidParams(err.message);
      default:
        return new A2aError(CODE.internal, 'internal error');
    }
  }
  return new A2aError(CODE.internal, 'internal error');
};
