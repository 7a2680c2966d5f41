/**
 * The capsule's door on node:http: routing (POST / with a JSON body, else 404), door token, and the
 * two streaming endpoints written byte for byte (spec "Endpoints", "Replay"). Task execution and
 * broadcast belong to the capsule (index.ts) through `DoorHost`. Later release lines change method
 * names and checks through the session's `rules` (release-line.ts); the JSON methods are in
 * task-methods.ts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Connection } from './connection.js';
import { connectionAckFrame, errorFrame } from './frames.js';
import { parseLastEventId } from './ids.js';
import { parseMessageParams } from './message.js';
import { RPC, sendNotFound, sendRpcError, sendUnauthorized, type RpcId } from './rpc.js';
import type { Session } from './session.js';
import { agentCard } from './agent-card.js';
import { a2aVersionOk, authorized } from './door-checks.js';
import type { LineRules } from './release-line.js';
import {
  extendedCard,
  roleError,
  sendMessage,
  submitMessage,
  tasksCancel,
  tasksGet,
} from './task-methods.js';

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
  /** The capsule's base url (the 0.5+ card names it as its interface). */
  readonly url: string;
  /** Register a streaming connection (so cut/stop/restart can drop it); not live yet. */
  track(conn: Connection): void;
  untrack(conn: Connection): void;
  /** Start receiving broadcast frames. */
  goLive(conn: Connection): void;
  /** A request the door refused for its token. */
  refused(): void;
  /** Count a task accepted for an A2A messageId (SimulatedCapsule.runs, and its 'run' event). */
  countRun(messageId: string): void;
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
  const rules = host.current.rules;
  const conn = new Connection(res, {
    heartbeatMs: host.options.heartbeatMs,
    queueSize: host.options.connectionQueue,
    closeOnLiveFinal,
    closesOnOwnFinal: rules.closesOnOwnFinal,
    reportsLag: rules.reportsLag,
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
  conn.writeReplay(host.current.replay(from), host.current.rules.sequenceIds);
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
  const session = host.current;
  // A replayed final status is written directly, so it never closes the connection.
  if (from !== null) conn.writeReplay(session.replay(from), session.rules.sequenceIds);
  const parsed = parseMessageParams(params);
  if (!parsed.ok) return conn.finish(errorFrame(`Invalid params: ${parsed.error}`));
  const badRole = roleError(session.rules, parsed.message);
  if (badRole !== null) return conn.finish(errorFrame(`Invalid params: ${badRole}`));
  // Live before submitting so the task's first frame reaches this connection (the task loop is async).
  host.goLive(conn);
  const result = submitMessage(session, parsed.message);
  if (result.kind === 'not-found' || result.kind === 'not-continuable') {
    host.untrack(conn);
    const why = result.kind === 'not-found' ? RPC.taskNotFound : RPC.unsupportedOperation;
    return conn.finish(errorFrame(why.message));
  }
  if (result.kind === 'accepted') host.countRun(parsed.message.messageId);
  // 0.5+ closes this stream on this task's final only, and rejects it by this id at shutdown.
  conn.ownTaskId = result.task.taskId;
  if (result.kind === 'rejected') {
    // `rejected` goes to this connection only, id 0, never buffered nor broadcast.
    host.untrack(conn);
    conn.finish(result.frame);
  }
};

/** The card: the line's shape (agent-card.ts), served with no token whatever the door's setting. */
const sendCard = (host: DoorHost, res: ServerResponse): void => {
  const session = host.current;
  const authenticated = host.options.doorToken !== null;
  const body = JSON.stringify(
    agentCard({ rules: session.rules, sessionId: session.id, url: host.url, authenticated }),
  );
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

type Op = 'watch' | 'stream' | 'send' | 'get' | 'cancel' | 'card';

const OPS_03: Record<string, Op> = {
  'stream/watch': 'watch',
  'message/stream': 'stream',
  'tasks/get': 'get',
  'tasks/cancel': 'cancel',
};
const OPS_05: Record<string, Op> = { ...OPS_03, 'agent/getAuthenticatedExtendedCard': 'card' };
/** 1.0 renames every method but `stream/watch`; the old names are -32601 there. */
const OPS_10: Record<string, Op> = {
  'stream/watch': 'watch',
  SendStreamingMessage: 'stream',
  SendMessage: 'send',
  GetTask: 'get',
  CancelTask: 'cancel',
  GetExtendedAgentCard: 'card',
};

const opsOf = (rules: LineRules): Record<string, Op> =>
  rules.a2a1 ? OPS_10 : rules.strictAuth ? OPS_05 : OPS_03;

/** The node:http request listener for one simulated capsule. */
export const createDoorHandler =
  (host: DoorHost) =>
  async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req).catch(() => null);
    if (body === null) return;
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/.well-known/agent-card.json') return sendCard(host, res);
    if (req.method !== 'POST' || path !== '/') return sendNotFound(res);
    if (!isJsonContentType(req.headers['content-type']) || body.length === 0) return sendNotFound(res);
    const rules = host.current.rules;
    if (!authorized(req, host.options.doorToken, rules.strictAuth)) {
      host.refused();
      return sendUnauthorized(res);
    }
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
    // 1.0: every request, stream/watch included, names the protocol version it speaks.
    if (rules.a2a1 && !a2aVersionOk(req)) return sendRpcError(res, id, RPC.versionNotSupported);
    const op =
      typeof method === 'string' && Object.hasOwn(opsOf(rules), method) ? opsOf(rules)[method] : null;
    const session = host.current;
    switch (op) {
      case 'watch':
        return streamWatch(host, req, res);
      case 'stream':
        return messageStream(host, req, res, id, params);
      case 'send':
        return sendMessage(session, host.options, res, id, params);
      case 'get':
        return tasksGet(session, res, id, params);
      case 'cancel':
        return tasksCancel(session, res, id, params);
      case 'card':
        return extendedCard(session, host.url, res, id);
      default:
        return typeof method === 'string'
          ? sendRpcError(res, id, RPC.methodNotFound)
          : sendRpcError(res, id, RPC.invalidRequest);
    }
  };
