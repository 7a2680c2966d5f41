/**
 * GET of a general stream (PROTOCOL.md §5.5–§5.7): catch-up, `live=long-poll` and `live=sse`.
 * Long-poll and SSE wait on the store's `waitAfter` (appends of every replica wake it), never by
 * polling. An offset of an earlier epoch (the store regressed, or the stream was deleted and created
 * again) is 410: the reader starts over from `-1`. A fork's read stitches its source's messages
 * (the store does); a soft-deleted stream is 410.
 */
import type { Context } from 'hono';
import { linkSignals } from '../../src/core/linked-signal.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { endAfter, endOnShutdown } from '../../src/http/sse-ends.js';
import { encodeCommentBytes, encodeSse } from '../../src/http/sse.js';
import { SSE_DEFAULTS, startSse } from '../../src/http/sse-transport.js';
import { resolveOffset, type OffsetVerdict } from '../../src/streams/forks.js';
import type { ReadResult, StreamMeta, StreamStore } from '../../src/streams/types.js';
import { nextCursor, SSE_LIFETIME_MS } from './offsets.js';
import { GONE_MESSAGE, SECURITY_HEADERS, streamProblem } from './stream-errors.js';
import { offsetAt } from './stream-headers.js';
import { isJsonMode, parseReadOffset, sseBase64, type ReadStart } from './stream-input.js';

/** One read answers at most this many messages and about this many bytes (§5.5 chunking). */
const PAGE_ENTRIES = 1000;
const PAGE_BYTES = 1024 * 1024;
const HEARTBEAT = encodeCommentBytes(' heartbeat');

/**
 * How much larger a data event is than the messages it carries: base64 is 4/3; a text stream's
 * every line break becomes `\ndata:` (6 bytes for 1); JSON carries its messages as they are plus a
 * comma each (counted in EVENT_SLACK).
 */
const expansionOf = (encoding: SseEncoding): number =>
  encoding === 'base64' ? 4 / 3 : encoding === 'text' ? 6 : 1;
/** Per event: `event: data`, `data:`, the JSON array's brackets and commas, the control event. */
const EVENT_SLACK = 16 * 1024;
/** What a client may have queued before a read waits for it to drain (sse-stream.ts's high water). */
const DRAIN_MARK = 256 * 1024;

type SseEncoding = 'json' | 'text' | 'base64';

/**
 * SSE pages and the per-client byte bound, so that any stored message can be read: a page's raw
 * bytes are chosen so its event stays within the transport's usual bound, and the bound is raised
 * to hold one event of the largest message there can be (a read always returns at least one message,
 * however large). Without this, one base64 event of 16 × 60 KB messages (1.3 MiB) overflowed the
 * 1 MiB bound at once, on every reconnect, and the reader never got past it.
 */
const sseBudget = (
  encoding: SseEncoding,
  maxMessageBytes: number,
): { pageBytes: number; maxQueuedBytes: number } => {
  const expansion = expansionOf(encoding);
  const base = SSE_DEFAULTS.maxQueuedBytes;
  const pageBytes = Math.max(1, Math.floor((base - DRAIN_MARK - EVENT_SLACK) / expansion));
  const largestEvent = Math.ceil(Math.max(pageBytes, maxMessageBytes) * expansion) + EVENT_SLACK;
  return { pageBytes, maxQueuedBytes: Math.max(base, largestEvent + DRAIN_MARK) };
};

const positionOf = (start: ReadStart, meta: StreamMeta): OffsetVerdict => {
  if (start.kind === 'start') return { position: 0 };
  if (start.kind === 'now') return { position: meta.tail };
  return resolveOffset(meta, start.epoch, start.position);
};

const COMMA = 0x2c;

/**
 * Bodies built from pages the store hands out again as the same array (the Redis store's read
 * cache): many readers catching up through one page share one body instead of a copy each (the
 * copies and their collection were 40 % of a 50-reader catch-up). Kept as long as the page is.
 */
const sharedBodies = new WeakMap<Buffer[], { json: boolean; body: Buffer }>();

/**
 * A catch-up page's body in one allocation: JSON mode `[e,e,…]`, else the messages end to end.
 * (Concatenating a list of one-byte buffers and then copying the result cost a quarter of a
 * 1,000-message read.)
 */
const bodyOf = (meta: StreamMeta, entries: Buffer[]): Buffer => {
  const json = isJsonMode(meta.contentType);
  const shared = sharedBodies.get(entries);
  if (shared?.json === json) return shared.body;
  const body = joined(json, entries);
  sharedBodies.set(entries, { json, body });
  return body;
};

const joined = (json: boolean, entries: Buffer[]): Buffer => {
  if (!json) return Buffer.concat(entries);
  let length = entries.length + (entries.length === 0 ? 2 : 1);
  for (const e of entries) length += e.length;
  const body = Buffer.allocUnsafeSlow(length);
  body[0] = 0x5b; // [
  let at = 1;
  for (let i = 0; i < entries.length; i++) {
    if (i > 0) body[at++] = COMMA;
    at += entries[i]!.copy(body, at);
  }
  body[at] = 0x5d; // ]
  return body;
};

export const readGeneralStream = async (
  c: Context,
  deps: AdapterDeps,
  store: StreamStore,
  path: string,
): Promise<Response> => {
  const live = c.req.query('live');
  if (live !== undefined && live !== 'long-poll' && live !== 'sse') {
    return streamProblem(c, 'bad_request', 'live must be long-poll or sse');
  }
  const offsets = c.req.queries('offset');
  const start = parseReadOffset(offsets);
  if (!start.ok) return streamProblem(c, start.error.code, start.error.message);
  if (live && offsets === undefined) return streamProblem(c, 'bad_request', `live=${live} needs an offset`);
  // A catch-up or long-poll from `-1` or an offset reads its first page in the same store call that
  // checks the offset: a valid offset names the position it spells (resolveOffset), so the page is
  // read there at once and the verdict taken on the meta of that very read (one Redis script, not
  // two). `offset=now` and SSE read the meta alone first. Every GET renews a sliding Stream-TTL.
  const claimed = start.value.kind === 'start' ? 0 : start.value.kind === 'at' ? start.value.position : null;
  const first =
    claimed !== null && live !== 'sse'
      ? await store.read(path, claimed, PAGE_ENTRIES, PAGE_BYTES)
      : await store.read(path, 0, 0, 0);
  const head = first?.meta;
  if (!head) return streamProblem(c, 'not_found', 'no such stream');
  if (head.gone) return streamProblem(c, 'stream_gone', GONE_MESSAGE);
  const at = positionOf(start.value, head);
  if ('code' in at) return streamProblem(c, at.code, at.message);
  if (live === 'sse') {
    const encoding = sseBase64(head.contentType) ? 'base64' : isJsonMode(head.contentType) ? 'json' : 'text';
    return sseRead(c, deps, store, path, at.position, encoding);
  }

  const after = at.position;
  // A verdict always names the position the offset spells; were it another, the page is read again.
  let read: ReadResult | null =
    start.value.kind === 'now'
      ? { meta: head, entries: [] }
      : after === claimed
        ? first
        : await store.read(path, after, PAGE_ENTRIES, PAGE_BYTES);
  if (!read) return streamProblem(c, 'not_found', 'no such stream');
  if (live === 'long-poll' && read.entries.length === 0 && !read.meta.closed) {
    const linked = linkSignals(c.req.raw.signal, deps.core.shutdownSignal);
    try {
      await store.waitAfter(path, after, deps.config.longPollMaxMs, linked.signal);
    } finally {
      linked.release();
    }
    read = await store.read(path, after, PAGE_ENTRIES, PAGE_BYTES);
    if (!read) return streamProblem(c, 'not_found', 'no such stream');
    if (read.meta.gone) return streamProblem(c, 'stream_gone', GONE_MESSAGE);
    // A new epoch while waiting: the position no longer names what the reader holds.
    if (read.meta.epoch !== head.epoch)
      return streamProblem(c, 'offset_gone', 'the stream began a new epoch');
  }
  const { meta, entries } = read;
  const next = after + entries.length;
  const upToDate = next >= meta.tail;
  const headers: Record<string, string> = {
    ...SECURITY_HEADERS,
    'content-type': meta.contentType,
    'stream-next-offset': offsetAt(meta, next),
  };
  if (upToDate) headers['stream-up-to-date'] = 'true';
  if (upToDate && meta.closed) headers['stream-closed'] = 'true';
  if (live) {
    headers['stream-cursor'] = nextCursor(c.req.query('cursor'));
    headers['cache-control'] = 'no-store';
    if (entries.length === 0) return c.body(null, 204, headers);
  }
  if (start.value.kind === 'now' && !live) {
    headers['cache-control'] = 'no-store';
    return c.body(isJsonMode(meta.contentType) ? '[]' : '', 200, headers);
  }
  headers['cache-control'] ??= upToDate ? 'no-cache' : 'private, max-age=60, stale-while-revalidate=300';
  const etag = `"${meta.epoch}:${after}:${next}${upToDate && meta.closed ? ':c' : ''}"`;
  headers.etag = etag;
  if (c.req.header('if-none-match') === etag) return c.body(null, 304, headers);
  // A Buffer is a Uint8Array: handed over as it is, not copied again.
  return c.body(bodyOf(meta, entries) as Uint8Array<ArrayBuffer>, 200, headers);
};

/**
 * §5.7: `event: data` per read, each followed by `event: control`; ends at a closed tail or after
 * §8.2's lifetime. Bytes go through the gateway's one SSE transport (heartbeats, the byte bound, a
 * catch-up at the client's pace, drain). Binary streams' data events are base64, each one whole
 * (padded on its own), so a reader decodes every event independently.
 */
const sseRead = (
  c: Context,
  deps: AdapterDeps,
  store: StreamStore,
  path: string,
  from: number,
  encoding: SseEncoding,
): Response => {
  const base64 = encoding === 'base64';
  const budget = sseBudget(encoding, deps.config.durableStreams?.maxMessageBytes ?? PAGE_BYTES);
  const { stream, response } = startSse(c, {
    maxQueuedBytes: budget.maxQueuedBytes,
    headers: { ...SECURITY_HEADERS, ...(base64 ? { 'stream-sse-data-encoding': 'base64' } : {}) },
    heartbeat: { bytes: HEARTBEAT, everyMs: deps.config.heartbeatMs },
    // Past the byte bound the stream just ends; the client resumes from its last control's offset.
    onOverflow: () => null,
  });
  endOnShutdown(deps.core.shutdownSignal, stream);
  if (!stream.open) return response;
  endAfter(stream, SSE_LIFETIME_MS);
  const over = new AbortController();
  stream.onClose(() => over.abort());
  let cursor: string | undefined = c.req.query('cursor');
  const control = (meta: StreamMeta, position: number): string => {
    const upToDate = position >= meta.tail;
    const body: Record<string, unknown> = { streamNextOffset: offsetAt(meta, position) };
    if (upToDate && meta.closed) body.streamClosed = true;
    else {
      cursor = nextCursor(cursor);
      body.streamCursor = cursor;
    }
    if (upToDate) body.upToDate = true;
    return encodeSse({ event: 'control', data: JSON.stringify(body) }, '');
  };
  void (async () => {
    let position = from;
    let epoch: number | null = null;
    // Whether the last control event already told the reader it is at this position's tail.
    let told = false;
    try {
      while (stream.open) {
        const read = await store.read(path, position, PAGE_ENTRIES, budget.pageBytes);
        if (!stream.open || !read || read.meta.gone || (epoch !== null && read.meta.epoch !== epoch)) break;
        epoch = read.meta.epoch;
        const { meta, entries } = read;
        if (entries.length > 0) {
          const data = isJsonMode(meta.contentType)
            ? `[${entries.map((e) => e.toString('utf8')).join(',')}]`
            : Buffer.concat(entries).toString(base64 ? 'base64' : 'utf8');
          position += entries.length;
          stream.write(Buffer.from(encodeSse({ event: 'data', data }, '') + control(meta, position), 'utf8'));
          told = position >= meta.tail;
          if (told && meta.closed) break;
          if (stream.backedUp) await stream.waitDrain();
          continue;
        }
        // At the tail: one control says so (at once on the first read, then after each idle wait).
        // A close with nothing appended is news too: its control event ends the stream.
        if (!told || meta.closed) stream.write(Buffer.from(control(meta, position), 'utf8'));
        if (meta.closed) break;
        const woke = await store.waitAfter(path, position, deps.config.longPollMaxMs, over.signal);
        told = woke.ready;
      }
    } catch (err) {
      deps.logger.warn({ err: String(err), path }, 'general stream SSE read failed');
    } finally {
      stream.end();
    }
  })();
  return response;
};
