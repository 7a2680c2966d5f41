/**
 * The capsule's door on node:http: routing (POST / with a JSON body, else 404), door token, and the
 * two streaming endpoints written byte for byte (spec "Endpoints", "Replay"). Task execution and
 * broadcast belong to the capsule (index.ts) through `DoorHost`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Connection } from './connection.js';
import { connectionAckFrame, errorFrame } from './frames.js';
import { parseLastEventId } from './ids.js';
import { messageText, parseMessageParams } from './message.js';
import {
  RPC,
  sendNotFound,
  sendRpcError,
  sendRpcResult,
  sendUnauthorized,
  taskJson,
  type RpcId,
} from './rpc.js';
import type { Session } from './session.js';

export interface DoorOptions {
  heartbeatMs: number;
  connectionQueue: number;
  conversationMode: 'stateless' | 'threaded';
  doorToken: string | null;
  acceptance: 'none' | 'single' | 'queue';
}

export interface DoorHost {
  readonly options: DoorOptions;
  readonly current: Session;
  /** Register a streaming connection (so cut/stop/restart can drop it); not live yet. */
  track(conn: Connection): void;
  untrack(conn: Connection): void;
  /** Start receiving broadcast frames. */
  goLive(conn: Connection): void;
}

const MAX_BODY = 1 << 20;

const readBody = (req: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });

const isJsonContentType = (value: string | undefined): boolean =>
  (value ?? '').split(';')[0]?.trim().toLowerCase() === 'application/json';

const rpcIdOf = (v: unknown): RpcId => (typeof v === 'string' || typeof v === 'number' ? v : null);

/** Exactly these three headers (plus chunked framing): no content-length, no date. */
const openEventStream = (res: ServerResponse): void => {
  res.sendDate = false;
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  res.flushHeaders();
};

const newConnection = (host: DoorHost, res: ServerResponse, closeOnLiveFinal: boolean): Connection => {
  const conn = new Connection(res, {
    heartbeatMs: host.options.heartbeatMs,
    queueSize: host.options.connectionQueue,
    closeOnLiveFinal,
    onClose: (c) => host.untrack(c),
  });
  host.track(conn);
  return conn;
};

/** stream/watch: ack, replay from Last-Event-ID (absent or not a number → 0), then live. */
const streamWatch = (host: DoorHost, req: IncomingMessage, res: ServerResponse): void => {
  openEventStream(res);
  const conn = newConnection(host, res, false);
  conn.writeDirect(connectionAckFrame(host.options.conversationMode).bytes);
  const from = parseLastEventId(req.headers['last-event-id'] as string | undefined) ?? 0n;
  for (const f of host.current.buffer.replay(from)) conn.writeDirect(f.bytes);
  host.goLive(conn);
};

/** message/stream: replay only on a numeric Last-Event-ID, then parse, accept, live until a final. */
const messageStream = (
  host: DoorHost,
  req: IncomingMessage,
  res: ServerResponse,
  id: RpcId,
  params: unknown,
): void => {
  if (host.options.acceptance === 'none') return sendRpcError(res, id, RPC.methodNotFound);
  openEventStream(res);
  const conn = newConnection(host, res, true);
  const from = parseLastEventId(req.headers['last-event-id'] as string | undefined);
  // A replayed final status is written directly, so it never closes the connection.
  if (from !== null) for (const f of host.current.buffer.replay(from)) conn.writeDirect(f.bytes);
  const parsed = parseMessageParams(params);
  if (!parsed.ok) return conn.finish(errorFrame(`Invalid params: ${parsed.error}`));
  const runner = host.current.runner;
  // Live before submitting so the task's first frame reaches this connection (the task loop is async).
  host.goLive(conn);
  const result = runner.submit(messageText(parsed.message), parsed.message.contextId);
  if (result.kind === 'rejected') {
    // `rejected` goes to this connection only, id 0, never buffered nor broadcast.
    host.untrack(conn);
    conn.finish(result.frame);
  }
};

const taskIdParam = (params: unknown): string | null => {
  if (typeof params !== 'object' || params === null) return null;
  const id = (params as Record<string, unknown>).id;
  return typeof id === 'string' ? id : null;
};

const tasksGet = (host: DoorHost, res: ServerResponse, id: RpcId, params: unknown): void => {
  const taskId = taskIdParam(params);
  if (taskId === null) return sendRpcError(res, id, RPC.invalidParams);
  const task = host.current.runner.get(taskId);
  if (!task) return sendRpcError(res, id, RPC.taskNotFound);
  sendRpcResult(res, id, taskJson(task));
};

const tasksCancel = (host: DoorHost, res: ServerResponse, id: RpcId, params: unknown): void => {
  const taskId = taskIdParam(params);
  if (taskId === null) return sendRpcError(res, id, RPC.invalidParams);
  const result = host.current.runner.cancel(taskId);
  if (result.ok) return sendRpcResult(res, id, taskJson(result.task));
  sendRpcError(res, id, result.reason === 'not-found' ? RPC.taskNotFound : RPC.taskNotCancelable);
};

/**
 * A minimal agent card (no auth needed, murmur-upstream.md): enough for discovery to check that a
 * running-capsule record's session is the one answering at its url.
 */
const agentCard = (host: DoorHost, res: ServerResponse): void => {
  const body = JSON.stringify({
    name: 'murmur-simulator',
    protocolVersion: '0.3',
    capabilities: { streaming: true },
    metadata: { session_id: host.current.id },
  });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

/** The node:http request listener for one simulated capsule. */
export const createDoorHandler =
  (host: DoorHost) =>
  async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req).catch(() => null);
    if (body === null) return;
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/.well-known/agent-card.json') return agentCard(host, res);
    if (req.method !== 'POST' || path !== '/') return sendNotFound(res);
    if (!isJsonContentType(req.headers['content-type']) || body.length === 0) return sendNotFound(res);
    const token = host.options.doorToken;
    if (token !== null && req.headers.authorization !== `Bearer ${token}`) return sendUnauthorized(res);
    let rpc: unknown;
    try {
      rpc = JSON.parse(body.toString('utf8'));
    } catch {
      return sendRpcError(res, null, RPC.parseError);
    }
    if (typeof rpc !== 'object' || rpc === null || Array.isArray(rpc)) {
      return sendRpcError(res, null, RPC.invalidRequest);
    }
    const { id: rawId, method, params } = rpc as Record<string, unknown>;
    const id = rpcIdOf(rawId);
    switch (method) {
      case 'stream/watch':
        return streamWatch(host, req, res);
      case 'message/stream':
        return messageStream(host, req, res, id, params);
      case 'tasks/get':
        return tasksGet(host, res, id, params);
      case 'tasks/cancel':
        return tasksCancel(host, res, id, params);
      default:
        return typeof method === 'string'
          ? sendRpcError(res, id, RPC.methodNotFound)
          : sendRpcError(res, id, RPC.invalidRequest);
    }
  };
