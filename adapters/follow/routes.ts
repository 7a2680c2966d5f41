/**
 * `GET /v1/follow`: many streams of any surface over one connection, each from its own cursor.
 *
 * SSE (`live=sse`, the default): every event is `id: <token>` and `data: {"stream", "cursor",
 * "event", "data"}`, the token holding every stream's cursor after that event, so an EventSource
 * that reconnects on its own (sending only `Last-Event-ID`) resumes every stream exactly. Each stream
 * is read by its own loop over its surface's follow source (catch-up pages; then, at the head, the
 * batches its source pushes from one hub subscription per capsule per process, or where a source has
 * none, a wait on the hub's one reader of that capsule), and all of them write into the one SSE
 * transport: one write per connection per turn, however many streams had something. Per event a
 * connection makes only its `id:` line (the token, re-encoded for the one stream that moved); the
 * `data:` bytes are made once per event object, which a source may share among all its readers.
 *
 * Long-poll (`live=long-poll`): answers as soon as any stream has events, or empty when the hold
 * (`downstream.longPollMaxMs`, or the shorter `wait=SECONDS` the client asks for) ends: `{"events": [...], "cursors": {KEY: CURSOR}}`.
 *
 * Every stream is opened before anything is answered: one the caller may not see, or that does not
 * exist, refuses the whole request (404 naming the key); so does a bad cursor (400).
 */
import { setMaxListeners } from 'node:events';
import { Hono, type Context } from 'hono';
import { principalOf } from '../../src/auth/principal.js';
import { linkSignals } from '../../src/core/linked-signal.js';
import { GatewayError } from '../../src/errors.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { endOnShutdown } from '../../src/http/sse-ends.js';
import { startSse } from '../../src/http/sse-transport.js';
import type { FollowEvent, FollowSource, FollowTarget } from '../../src/http/surface.js';
import { FollowRequestError, FollowToken, parseFollowRequest, type FollowKey } from './request.js';

export const FOLLOW_PATH = '/v1/follow';
/** Events one stream reads at a time: a stream far behind does not hold the others' turn. */
const PAGE = 100;
const HEARTBEAT = Buffer.from(':\n\n');
const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

export type FollowErrorCode =
  'bad_request' | 'unauthorized' | 'not_found' | 'method_not_allowed' | 'store_unavailable' | 'internal';

export const followError = (
  c: Context,
  status: number,
  code: FollowErrorCode,
  message: string,
  headers: Record<string, string> = {},
): Response =>
  c.body(JSON.stringify({ error: { code, message } }), status as 400, { ...JSON_HEADERS, ...headers });

interface Opened {
  key: FollowKey;
  target: FollowTarget;
  cursor: string;
}

/** An event's `data:` line and the blank line after it, for the stream `key`. */
const dataText = (key: string, ev: FollowEvent): string => {
  const head = `data: {"stream":${JSON.stringify(key)},"cursor":${JSON.stringify(ev.cursor)},"event":${JSON.stringify(ev.event)},"data":`;
  return `${head}${ev.json ?? JSON.stringify(ev.data)}}\n\n`;
};

/** The last `data:` bytes made for an event object, and for which stream. */
const encoded = new WeakMap<FollowEvent, { key: string; bytes: Buffer }>();

/** An event's `data:` bytes, made once per event object and stream: shared by every connection. */
const dataBytes = (key: string, ev: FollowEvent): Buffer => {
  const known = encoded.get(ev);
  if (known?.key === key) return known.bytes;
  const bytes = Buffer.from(dataText(key, ev));
  encoded.set(ev, { key, bytes });
  return bytes;
};

export const createFollowRoutes = (deps: AdapterDeps, sources: readonly FollowSource[]): Hono => {
  const { core, config, logger } = deps;
  const bySchema = new Map(sources.map((s) => [s.scheme, s]));
  const app = new Hono();

  /** Every stream opened, or the refusal of the first that cannot be. */
  const openAll = async (c: Context, keys: FollowKey[]): Promise<Opened[]> => {
    const principal = principalOf(c);
    return Promise.all(
      keys.map(async (key) => {
        const source = bySchema.get(key.scheme);
        if (!source) throw new FollowRequestError(404, 'not_found', `no such stream: ${key.key}`);
        const opened = await source.open(principal, key.name, key.cursor);
        if (!opened.ok)
          throw new FollowRequestError(
            opened.status,
            opened.status === 404 ? 'not_found' : 'bad_request',
            opened.status === 404 ? `no such stream: ${key.key}` : `${key.key}: ${opened.message}`,
          );
        return { key, target: opened.target, cursor: opened.cursor };
      }),
    );
  };

  const sse = (c: Context, opened: Opened[]): Response => {
    const cursors = opened.map((o) => o.cursor);
    const token = new FollowToken(cursors);
    const { stream, response } = startSse(c, {
      heartbeat: { bytes: HEARTBEAT, everyMs: config.heartbeatMs },
    });
    // A first byte at once: a client tells a stream held back by a proxy from a quiet one by it.
    stream.write(HEARTBEAT);
    // The drain ends the stream through one listener shared by every stream (not one each), and the
    // stream's end stops every loop of this connection.
    endOnShutdown(core.shutdownSignal, stream);
    const stop = new AbortController();
    // Every stream's wait listens on it: one listener per stream is no leak.
    setMaxListeners(opened.length + 10, stop.signal);
    void stream.done.then(() => stop.abort());

    /**
     * Stream `i`'s events, each after its own token, in one Buffer and one write; then its cursor
     * after them. Tokens are ASCII (base64url): written straight into the Buffer, beside the shared
     * `data:` bytes, with no Buffer of their own.
     */
    const send = (i: number, events: readonly FollowEvent[], cursor: string): void => {
      if (events.length > 0) {
        const key = opened[i]!.key.key;
        const ids: string[] = [];
        const data: Buffer[] = [];
        let size = 0;
        for (const ev of events) {
          token.set(i, ev.cursor);
          const id = `id: ${token.toString()}\n`;
          const bytes = dataBytes(key, ev);
          ids.push(id);
          data.push(bytes);
          size += id.length + bytes.length;
        }
        const out = Buffer.allocUnsafe(size);
        let at = 0;
        for (let n = 0; n < ids.length; n++) {
          at += out.write(ids[n]!, at, 'latin1');
          at += data[n]!.copy(out, at);
        }
        cursors[i] = events[events.length - 1]!.cursor;
        stream.write(out);
      }
      if (cursors[i] !== cursor) {
        cursors[i] = cursor;
        token.set(i, cursor);
      }
    };

    /**
     * Stream `i` at its head, fed by its source's pushes until they end (then false: read again)
     * or the connection does; null when the source cannot take it live now (then wait on a read).
     */
    const live = (i: number, target: FollowTarget): Promise<void> | null => {
      let handle: { close(): void } | null = null;
      let finish: () => void = () => undefined;
      const ended = new Promise<void>((resolve) => {
        finish = () => {
          stop.signal.removeEventListener('abort', finish);
          handle?.close();
          resolve();
        };
      });
      handle = target.live!(cursors[i]!, {
        events: (events, cursor) => {
          if (stream.open) send(i, events, cursor);
        },
        lost: () => finish(),
      });
      if (!handle) return null;
      stop.signal.addEventListener('abort', finish, { once: true });
      return ended;
    };

    const follow = async (i: number): Promise<void> => {
      const { target } = opened[i]!;
      let wait = target.live === undefined;
      while (stream.open && !stop.signal.aborted) {
        const page = await target.read(cursors[i]!, PAGE, wait ? config.longPollMaxMs : 0, stop.signal);
        if (!stream.open) return;
        send(i, page.events, page.cursor);
        if (stream.backedUp) await stream.waitDrain();
        if (target.live === undefined || page.events.length > 0 || !stream.open) continue;
        // Nothing more to read: live from the source's pushes, or (when it cannot) a waiting read.
        const pushed = live(i, target);
        wait = pushed === null;
        if (pushed) await pushed;
      }
    };
    void Promise.all(opened.map((_, i) => follow(i)))
      .catch((err: unknown) => {
        // The store is away or the gateway drains: the client comes back with its token.
        if (!(err instanceof GatewayError)) logger.error({ err }, 'follow: a stream failed');
      })
      .finally(() => {
        stream.end();
        stop.abort();
      });
    return response;
  };

  const longPoll = async (c: Context, opened: Opened[], waitMs: number | null): Promise<Response> => {
    const cursors = opened.map((o) => o.cursor);
    const events: { stream: string; cursor: string; event: string; data: unknown }[] = [];
    const take = (i: number, page: { events: FollowEvent[]; cursor: string }): void => {
      for (const ev of page.events)
        events.push({ stream: opened[i]!.key.key, cursor: ev.cursor, event: ev.event, data: ev.data });
      cursors[i] = page.cursor;
    };
    const first = new AbortController();
    const linked = linkSignals(c.req.raw.signal, core.shutdownSignal, first.signal);
    setMaxListeners(opened.length + 10, linked.signal);
    const deadline = Date.now() + Math.min(waitMs ?? config.longPollMaxMs, config.longPollMaxMs);
    try {
      // What is there already, every stream at once; else hold until any stream gets something
      // (a read may come back early with nothing to show, its cursor moved on: it waits again).
      const now = await Promise.all(opened.map((o, i) => o.target.read(cursors[i]!, PAGE, 0, linked.signal)));
      now.forEach((page, i) => take(i, page));
      if (events.length === 0) {
        await Promise.all(
          opened.map(async (o, i) => {
            for (
              let left = deadline - Date.now();
              left > 0 && !linked.signal.aborted;
              left = deadline - Date.now()
            ) {
              const page = await o.target.read(cursors[i]!, PAGE, left, linked.signal);
              take(i, page);
              if (page.events.length > 0) first.abort();
            }
          }),
        );
      }
    } finally {
      linked.release();
    }
    const body = { events, cursors: Object.fromEntries(opened.map((o, i) => [o.key.key, cursors[i]!])) };
    return c.body(JSON.stringify(body), 200, JSON_HEADERS);
  };

  app.get(FOLLOW_PATH, async (c) => {
    try {
      if (principalOf(c).kind === 'anonymous')
        return followError(
          c,
          401,
          'unauthorized',
          'a valid credential is required (Authorization: Bearer …)',
        );
      const request = parseFollowRequest(
        c.req.queries(),
        c.req.header('last-event-id'),
        config.follow?.maxStreams ?? 256,
      );
      const opened = await openAll(c, request.keys);
      return request.live === 'sse' ? sse(c, opened) : await longPoll(c, opened, request.waitMs);
    } catch (err) {
      if (err instanceof FollowRequestError) return followError(c, err.status, err.code, err.message);
      if (err instanceof GatewayError && (err.code === 'store_unavailable' || err.code === 'shutting_down'))
        return followError(c, 503, 'store_unavailable', 'the log store is unavailable, retry', {
          'retry-after': '1',
        });
      throw err;
    }
  });
  app.all(FOLLOW_PATH, (c) => followError(c, 405, 'method_not_allowed', 'use GET', { allow: 'GET' }));
  return app;
};
