/**
 * `GET|HEAD /v1/stream/murmur/{capsule}`: a capsule's log as a read-only Durable Stream in JSON mode
 * (PROTOCOL.md). Each message is the record object `GET /murmur/{c}/poll` returns; loss facts are
 * messages like any other, so a reader meets them in order. Offsets are `EPOCH_OFFSET` (two 16-digit
 * components, src/http/epoch-offset.ts): an offset of another epoch or below retention is 410, never
 * a silent skip. Catch-up, `live=long-poll` and `live=sse` (capsule-sse.ts); writes are 405 with
 * `Allow`. Readers need the `observe` scope (access.ts).
 */
import { Hono, type Context } from 'hono';
import { principalOf } from '../../src/auth/principal.js';
import { linkSignals } from '../../src/core/linked-signal.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { LogRecord } from '../../src/log/record.js';
import { formatEpochOffset as formatOffset } from '../../src/http/epoch-offset.js';
import { recordText } from '../../src/http/record-json.js';
import { capsuleStreamAccess } from './capsule-access.js';
import { capsuleSseResponse, capsuleStreamFeeds } from './capsule-sse.js';
import { problem, readFailure, STREAM_MESSAGES } from './capsule-errors.js';
import { nextCursor, SSE_LIFETIME_MS, startOf } from './offsets.js';

const CAPSULE_STREAM_ROUTE = '/v1/stream/murmur/:capsule';
const PAGE = 1000;
const LIVE_MODES = new Set(['long-poll', 'sse']);

/**
 * §8.1: `private` for a log read with a credential (confidential: a shared cache must not hand it
 * to the next client), `public` only when the gateway runs without auth.
 */
const cacheScope = (c: Context): 'public' | 'private' =>
  principalOf(c).kind === 'open' ? 'public' : 'private';

export interface CapsuleStreamOptions {
  /** How long an SSE connection lives before the server closes it (default SSE_LIFETIME_MS). */
  sseLifetimeMs?: number;
}

export const createCapsuleStreamRoutes = (deps: AdapterDeps, options: CapsuleStreamOptions = {}): Hono => {
  const { core, config, logger } = deps;
  const lifetimeMs = options.sseLifetimeMs ?? SSE_LIFETIME_MS;
  const feeds = capsuleStreamFeeds(deps);
  const app = new Hono();
  app.use(CAPSULE_STREAM_ROUTE, capsuleStreamAccess);

  app.on(['GET', 'HEAD'], CAPSULE_STREAM_ROUTE, async (c) => {
    const capsule = c.req.param('capsule');
    if (!core.hasCapsule(capsule)) return problem(404, STREAM_MESSAGES.notFound);
    const live = c.req.query('live');
    if (live !== undefined && !LIVE_MODES.has(live)) return problem(400, STREAM_MESSAGES.live);
    try {
      let position = await core.position(capsule);
      const start = startOf(c.req.query('offset'), position);
      if ('status' in start) return problem(start.status, start.message);
      if (live === 'sse' && c.req.method === 'GET') {
        const cursor = c.req.query('cursor');
        return capsuleSseResponse(deps, feeds, c, {
          capsule,
          after: start.after,
          position,
          cursor,
          lifetimeMs,
        });
      }
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
            : `${cacheScope(c)}, max-age=60, stale-while-revalidate=300`,
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
      return readFailure(err, logger, capsule);
    }
  });

  app.all(CAPSULE_STREAM_ROUTE, () => problem(405, STREAM_MESSAGES.readOnly, { allow: 'GET, HEAD' }));
  return app;
};
