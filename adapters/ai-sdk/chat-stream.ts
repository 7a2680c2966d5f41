/**
 * Reading a chat from the log and streaming one turn: the context's records through the hub's
 * per-context index (`readContext`), then the capsule's live records (`subscribe`) from where that
 * read is complete, each folded by the chat's own projector. A turn's stream is written from its
 * `start` whatever the moment (a POST, a resume after a cut, a reload), and ends after its `finish`
 * by closing the body: the one end the client's transport knows.
 */
import type { Context } from 'hono';
import type { GatewayCore } from '../../src/core/types.js';
import type { AdapterConfig } from '../../src/http/adapter-deps.js';
import { endOnShutdown } from '../../src/http/sse-ends.js';
import { startSse } from '../../src/http/sse-transport.js';
import type { UiChunk } from './chunks.js';
import type { ChatProjector } from './projection.js';
import type { Turn } from './turn.js';

/** Records per context read. */
const PAGE = 1000;

/** The headers of the SDK's own server helpers (UI_MESSAGE_STREAM_HEADERS) the transport leaves out. */
const STREAM_HEADERS = { 'x-vercel-ai-ui-message-stream': 'v1' };

const KEEPALIVE = Buffer.from(': keep-alive\n\n');
const DONE = Buffer.from('data: [DONE]\n\n');

const encodeChunk = (chunk: UiChunk): Buffer => Buffer.from(`data: ${JSON.stringify(chunk)}\n\n`);

/** Fold the chat's records after `projector.through` up to the head as of the call. */
export const readChat = async (
  core: GatewayCore,
  capsule: string,
  projector: ChatProjector,
): Promise<ChatProjector> => {
  for (;;) {
    const page = await core.readContext(capsule, projector.contextId, projector.through, PAGE);
    for (const record of page.records) projector.project(record);
    projector.through = Math.max(projector.through, page.next);
    if (page.records.length < PAGE) return projector;
  }
};

/**
 * Answer `turn` as a UI message stream: what the projector holds of it at once, then what the live
 * records add, until its `finish`. The client going away ends the subscription; a slow client or the
 * gateway draining ends the body early, and the client resumes with a GET.
 */
export const streamTurn = (
  c: Context,
  deps: { core: GatewayCore; config: AdapterConfig },
  capsule: string,
  projector: ChatProjector,
  turn: Turn,
): Response => {
  const { core, config } = deps;
  const { stream, response } = startSse(c, {
    headers: STREAM_HEADERS,
    heartbeat: { bytes: KEEPALIVE, everyMs: config.heartbeatMs },
  });
  endOnShutdown(core.shutdownSignal, stream);
  let written = 0;
  /** Write what the turn gained; true once it is over (and the body ended). */
  const flush = (): boolean => {
    if (!stream.open) return true;
    const out: Buffer[] = [];
    while (written < turn.chunks.length) out.push(encodeChunk(turn.chunks[written++]!));
    if (turn.finished) {
      stream.writeAll(out);
      stream.end(DONE);
      return true;
    }
    if (out.length > 0) stream.writeAll(out);
    return false;
  };
  if (flush()) return response;
  const closed = new AbortController();
  stream.onClose(() => closed.abort());
  core.subscribe(capsule, {
    after: projector.through,
    maxQueuedRecords: config.maxQueuedRecords,
    signal: closed.signal,
    onRecords: (records) => {
      for (const record of records) projector.project(record);
      if (flush()) closed.abort();
    },
    onEnd: (reason) => {
      if (reason !== 'closed') stream.end();
    },
  });
  return response;
};
