/**
 * `followMany`: many streams of any surface over one connection (`GET /v1/follow`), each event
 * once and in its stream's order, across reconnects, switches of transport (SSE, or long-poll behind
 * proxies that break it, as followCapsule does) and changes to the set of streams. The client keeps
 * every stream's cursor itself and opens each connection from them (not from the SSE token), so
 * adding or removing a stream is one reopen that neither loses nor repeats an event of the others.
 */
import { httpError, type HttpError } from './auth.js';
import { canShare, followManyShared } from './follow-shared.js';
import { followLoop } from './follow-loop.js';
import type { FollowManyEvent, FollowManyOptions, FollowManySubscription, Transport } from './types.js';

interface LongPollBody {
  events: FollowManyEvent[];
  cursors: Record<string, string>;
}

export const followMany = (options: FollowManyOptions): FollowManySubscription => {
  // Tabs of one origin share one connection where the browser lets them (follow-shared.ts).
  if (options.share && canShare())
    return followManyShared({ ...options, share: undefined }, options.share, followMany);
  const base = `${options.gateway.replace(/\/+$/, '')}/v1/follow`;
  /** Every stream followed, in the order it was added, and its cursor after the last event delivered. */
  const cursors = new Map<string, string>(Object.entries(options.streams));
  let reopening = false;

  const query = (): string =>
    [...cursors].map(([key, cursor]) => `stream=${encodeURIComponent(`${key}@${cursor}`)}`).join('&');

  /** One event of a stream still followed: its cursor moves first, so a throwing callback loses nothing. */
  const deliver = (ev: FollowManyEvent): void => {
    if (!cursors.has(ev.stream)) return;
    cursors.set(ev.stream, ev.cursor);
    options.onEvent(ev);
  };

  const loop = followLoop<LongPollBody>(
    options,
    {
      sseUrl: () => `${base}?${query()}`,
      sseEvents: ['message'],
      // The gateway writes a heartbeat as soon as the stream opens.
      liveBy: 'byte',
      onEvent: (_event, data) => deliver(JSON.parse(data) as FollowManyEvent),
      // The same request again, read only as far as its status.
      diagnose: async (url): Promise<HttpError | null> => {
        const abort = new AbortController();
        try {
          const res = await fetch(url, { signal: abort.signal, headers: { accept: 'text/event-stream' } });
          if (!res.ok) return await httpError(res, 'sse');
        } catch {
          // unreachable: the EventSource's failure was the connection's, as it looked
        } finally {
          abort.abort();
        }
        return null;
      },
      pollUrl: (hold) => `${base}?${query()}&live=long-poll&wait=${hold / 1000}`,
      onPoll: (body) => {
        for (const ev of body.events) deliver(ev);
        // Streams that moved on without an event to show (past records they do not show).
        for (const [key, cursor] of Object.entries(body.cursors))
          if (cursors.has(key)) cursors.set(key, cursor);
      },
    },
    // Nothing to follow: no connection until a stream is added.
    () => cursors.size === 0,
  );

  /** After add/remove: one reopen from every stream's cursor, however many changes this turn made. */
  const reopen = (): void => {
    if (loop.closed || reopening) return;
    reopening = true;
    queueMicrotask(() => {
      reopening = false;
      if (loop.closed) return;
      loop.stop();
      loop.connect();
    });
  };

  loop.connect();

  return {
    get cursors() {
      return Object.fromEntries(cursors);
    },
    get transport(): Transport {
      return loop.transport;
    },
    add: (key, cursor = '-1') => {
      if (loop.closed || cursors.has(key)) return;
      cursors.set(key, cursor);
      reopen();
    },
    remove: (key) => {
      if (loop.closed || !cursors.delete(key)) return;
      reopen();
    },
    close: () => loop.finish('closed by the caller'),
  };
};
