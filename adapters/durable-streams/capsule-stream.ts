/**
 * `GET|HEAD /v1/stream/murmur/{capsule}`: a capsule's log as a read-only Durable Stream in JSON mode
 * (PROTOCOL.md). Each message is the record object `GET /murmur/{c}/poll` returns; loss facts are
 * messages like any other, so a reader meets them in order. Offsets are `EPOCH_OFFSET` (two 16-digit
 * components, the Flue surface's format): an offset of another epoch or below retention is 410, never
 * a silent skip. Catch-up and `live=long-poll`; writes are 405 with `Allow`.
 */
import { Hono, type Context } from 'hono';
import { linkSignals } from '../../src/core/linked-signal.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { formatOffset, parseOffset } from '../flue/codec.js';
import { pollFailure } from '../murmur/poll.js';
import { recordText } from '../murmur/poll-json.js';
import { murmurAccess } from '../murmur/access.js';

export const CAPSULE_STREAM_ROUTE = '/v1/stream/murmur/:capsule';
const PAGE = 1000;
/** §10.1: cursors count 20 s intervals since this origin (2024-10-09T00:00:00Z). */
const CURSOR_ORIGIN_MS = Date.UTC(2024, 9, 9);
const CURSOR_INTERVAL_MS = 20_000;

const problem = (
  c: Context,
  status: 400 | 404 | 405 | 410,
  message: string,
  headers: Record<string, string> = {},
) =>
  c.body(JSON.stringify({ error: message }), status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...headers,
  });

/** §10.1: the current interval, moved on past a cursor the client echoes so CDNs never loop. */
export const nextCursor = (echoed: string | undefined, nowMs = Date.now()): string => {
  const current = Math.floor((nowMs - CURSOR_ORIGIN_MS) / CURSOR_INTERVAL_MS);
  const prior = echoed !== undefined && /^\d+$/.test(echoed) ? Number(echoed) : -1;
  return String(prior >= current ? prior + 1 + Math.floor(Math.random() * 180) : current);
};

type Start = { after: number } | { status: 400 | 410; message: string };

/** Where a read begins: after which log offset, or why it cannot. */
const startOf = (raw: string | undefined, position: LogPosition): Start => {
  if (raw === undefined || raw === '-1') return { after: 0 };
  if (raw === 'now') return { after: position.head };
  const parsed = parseOffset(raw);
  if (!parsed || parsed.kind !== 'at') return { status: 400, message: 'malformed offset' };
  if (parsed.epoch !== position.epoch)
    return { status: 410, message: 'offset from another epoch of this log' };
  if (parsed.offset > position.head) return { status: 400, message: 'offset beyond the tail of the stream' };
  if (parsed.offset > 0 && parsed.offset < position.first - 1)
    return { status: 410, message: 'offset older than retention' };
  return { after: parsed.offset };
};

export const createCapsuleStreamRoutes = (deps: AdapterDeps): Hono => {
  const { core, config, logger } = deps;
  const app = new Hono();
  app.use(CAPSULE_STREAM_ROUTE, murmurAccess);

  app.on(['GET', 'HEAD'], CAPSULE_STREAM_ROUTE, async (c) => {
    const capsule = c.req.param('capsule');
    if (!core.hasCapsule(capsule)) return problem(c, 404, 'no such stream');
    const live = c.req.query('live');
    if (live !== undefined && live !== 'long-poll') return problem(c, 400, 'live must be long-poll');
    try {
      let position = await core.position(capsule);
      const start = startOf(c.req.query('offset'), position);
      if ('status' in start) return problem(c, start.status, start.message);
      let records: readonly LogRecord[] = [];
      if (c.req.method !== 'HEAD') {
        ({ records, position } = await core.read(capsule, start.after, PAGE));
        if (records.length === 0 && live === 'long-poll') {
          const linked = linkSignals(c.req.raw.signal, core.shutdownSignal);
          try {
            ({ records, position } = await core.waitAfter(
              capsule,
              start.after,
              PAGE,
              config.longPollMaxMs,
              linked.signal,
            ));
          } finally {
            linked.release();
          }
        }
      }
      const last = records[records.length - 1];
      const next = formatOffset(
        position.epoch,
        last ? last.offset : Math.max(start.after, c.req.method === 'HEAD' ? position.head : start.after),
      );
      const upToDate = (last ? last.offset : start.after) >= position.head || c.req.method === 'HEAD';
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'stream-next-offset': next,
        'cache-control': live
          ? 'no-store'
          : upToDate
            ? 'no-cache'
            : 'public, max-age=60, stale-while-revalidate=300',
      };
      if (upToDate) headers['stream-up-to-date'] = 'true';
      if (live) headers['stream-cursor'] = nextCursor(c.req.query('cursor'));
      if (c.req.method === 'HEAD') return c.body(null, 200, headers);
      if (live && records.length === 0) return c.body(null, 204, headers);
      const etag = `"${capsule}:${formatOffset(position.epoch, start.after)}:${next}"`;
      headers.etag = etag;
      if (c.req.header('if-none-match') === etag) return c.body(null, 304, headers);
      return c.body(`[${records.map(recordText).join(',')}]`, 200, headers);
    } catch (err) {
      return pollFailure(err, logger, capsule);
    }
  });

  app.all(CAPSULE_STREAM_ROUTE, (c) =>
    problem(c, 405, 'capsule streams are read-only', { allow: 'GET, HEAD' }),
  );
  return app;
};
