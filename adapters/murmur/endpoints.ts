/**
 * The two streaming endpoints (spec "What stream/watch writes, in order" and "What message/stream
 * writes, in order"), served from the log with gateway offsets as ids. Routing and input checks are
 * routes.ts's; record-by-record decisions are feed.ts's.
 */
import { closesOnOwnFinal } from '../../src/core/release-lines.js';
import { GatewayError } from '../../src/errors.js';
import type { Context } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { SubmitOutcome } from '../../src/core/types.js';
import { endOnShutdown } from '../../src/http/sse-ends.js';
import { startSse, type SseStream } from '../../src/http/sse-transport.js';
import { REPLAY_PAGE, SSE_HEADERS } from './constants.js';
import {
  encodeConnectionAck,
  encodeErrorFrame,
  encodeRecord,
  encodeRejected,
  HEARTBEAT_BYTES,
} from './codec.js';
import { murmurError } from './errors.js';
import { checkCursor, LogFeed } from './feed.js';
import type { PreparedMessage } from './message.js';

export interface StreamContext {
  deps: AdapterDeps;
  capsule: string;
  /** The request's Hono context: the transport writes to the response behind it. */
  c: Context;
}

/** Past the byte bound the stream just ends (a shared function: no closure per connection). */
const NOTHING_ON_OVERFLOW = (): null => null;

const retryMsOf = (deps: AdapterDeps): number => Math.min(1000, deps.config.heartbeatMs);

export interface OpenedStream {
  conn: SseStream;
  /** What the handler returns. */
  response: Response;
}

/**
 * Open a connection. Heartbeats are due from `openedAt` (spec "Heartbeat": measured from connection
 * open; message/stream opens once the submission is answered but counts from the request). A client
 * past the transport's byte bound is ended with nothing written: the spec's slow-reader signal is
 * the connection ending, and Last-Event-ID resumes it from the log exactly.
 */
export const openConnection = ({ deps, c }: StreamContext, openedAt?: number): OpenedStream => {
  const { stream: conn, response } = startSse(c, {
    headers: SSE_HEADERS,
    heartbeat: { bytes: HEARTBEAT_BYTES, everyMs: deps.config.heartbeatMs },
    onOverflow: NOTHING_ON_OVERFLOW,
    ...(openedAt !== undefined ? { openedAt } : {}),
  });
  endOnShutdown(deps.core.shutdownSignal, conn);
  return { conn, response };
};

/**
 * `stream/watch` from `cursor` (0 when Last-Event-ID is absent or not a number): `connection-ack`
 * with the capsule's conversation_mode, a `gap` when the cursor is older than retention or beyond
 * the head, the replay, then live frames until the capsule closes its stream or the client leaves.
 */
export const serveWatch = (ctx: StreamContext, cursor: number): Response => {
  const { deps, capsule } = ctx;
  const { conn, response } = openConnection(ctx);
  conn.write(encodeConnectionAck(deps.core.conversationMode(capsule)));
  const feed = new LogFeed({
    core: deps.core,
    capsule,
    conn,
    logger: deps.logger,
    maxQueuedRecords: deps.config.maxQueuedRecords,
    retryMs: retryMsOf(deps),
    gaps: true,
    closeOnFinal: false,
    capsuleClosedFrame: true,
  });
  feed.begin(cursor);
  return response;
};

/** Write records (cursor, upTo] read page by page: the replay of a `message/stream` (finals stay open). */
const replayUpTo = async (
  ctx: StreamContext,
  conn: SseStream,
  cursor: number,
  upTo: number,
): Promise<void> => {
  const { core } = ctx.deps;
  let { after } = await checkCursor(core, ctx.capsule, cursor, conn);
  const maxPages = Math.ceil(Math.max(0, upTo - after) / REPLAY_PAGE) + 1;
  for (let page = 0; page < maxPages && after < upTo && conn.open; page++) {
    const { records } = await core.read(ctx.capsule, after, REPLAY_PAGE);
    const chunks: Buffer[] = [];
    for (const record of records) {
      if (record.offset > upTo) break;
      after = record.offset;
      // A replayed capsule-closed is history; message/stream never writes one (spec frame table).
      if (record.kind === 'fact' && record.fact === 'capsule-closed') continue;
      const bytes = encodeRecord(record);
      if (bytes) chunks.push(bytes);
    }
    conn.writeAll(chunks);
    if (records.length === 0 || records[records.length - 1]!.offset >= upTo) break;
    if (conn.backedUp) await conn.waitDrain();
  }
};

/**
 * The `error` frame for a capsule the gateway cannot reach (the frame's JSON is the gateway's). A
 * fixed text: the reason (a socket error naming the capsule's internal address) is only logged.
 */
const UNREACHABLE_FRAME = encodeErrorFrame(JSON.stringify({ error: 'capsule unreachable' }));

/**
 * `message/stream`: take the head as this client's start, submit (recorded, then forwarded with the
 * client's body so the capsule's own validation answers), then write the replay (when Last-Event-ID
 * was sent) and either the capsule's terminal answer or live frames until the first live final
 * `status` of any task. A JSON-RPC error from the capsule (`task_acceptance: none`) is answered as
 * the JSON it is, so the outcome is awaited before the stream opens; heartbeats still count from
 * the request's arrival.
 */
export const serveMessageStream = async (
  ctx: StreamContext,
  message: PreparedMessage,
  rpcId: string | number | null,
  lastEventId: number | null,
): Promise<Response> => {
  const { deps, capsule } = ctx;
  const arrivedAt = Date.now();
  let outcome: SubmitOutcome;
  let startHead: number;
  let startEpoch: number;
  try {
    const start = await deps.core.position(capsule);
    startHead = start.head;
    startEpoch = start.epoch;
    const result = await deps.core.submit(capsule, {
      text: message.text,
      contextId: message.contextId,
      messageId: message.messageId,
      rawBody: message.rawBody,
      ...(rpcId !== null ? { rpcId } : {}),
      record: { protocol: 'murmur', owner: null },
    });
    outcome = result.outcome;
  } catch (err) {
    // The submission could not be recorded (store down past the submit timeout, draining): it was
    // never forwarded. Nothing was streamed yet, so the answer is a JSON-RPC error, not a stream.
    deps.logger.warn({ err, capsule }, 'murmur: message/stream submit failed');
    const code = err instanceof GatewayError ? err.code : 'internal';
    const { status, body } = murmurError(code, rpcId);
    return new Response(body, { status, headers: { 'content-type': 'application/json' } });
  }
  if (outcome.kind === 'method-not-found') {
    return new Response(outcome.body, { status: 200, headers: { 'content-type': 'application/json' } });
  }
  const { conn, response } = openConnection(ctx, arrivedAt);
  void (async () => {
    if (lastEventId !== null) await replayUpTo(ctx, conn, lastEventId, startHead);
    switch (outcome.kind) {
      case 'rejected':
        conn.write(encodeRejected(outcome.frame.id, outcome.frame.data));
        conn.end();
        return;
      case 'invalid':
        conn.write(encodeErrorFrame(outcome.data));
        conn.end();
        return;
      case 'unreachable':
        deps.logger.warn({ capsule, reason: outcome.reason }, 'murmur: message/stream capsule unreachable');
        conn.write(UNREACHABLE_FRAME);
        conn.end();
        return;
      case 'accepted':
        new LogFeed({
          core: deps.core,
          capsule,
          conn,
          logger: deps.logger,
          maxQueuedRecords: deps.config.maxQueuedRecords,
          retryMs: retryMsOf(deps),
          // Spec frame table: message/stream carries `gap` only when the request sent Last-Event-ID.
          gaps: lastEventId !== null,
          // The spec's line closes on any task's final; from 0.5 on its own task's only.
          closeOnFinal: closesOnOwnFinal(deps.core.releaseLine(capsule)) ? outcome.taskId : true,
          capsuleClosedFrame: false,
        }).start({ after: startHead, liveAfter: startHead, epoch: startEpoch });
        return;
    }
  })().catch((err: unknown) => {
    deps.logger.warn({ err, capsule }, 'murmur: message/stream replay failed');
    conn.write(encodeErrorFrame(JSON.stringify({ error: 'internal error: replay failed' })));
    conn.end();
  });
  return response;
};
