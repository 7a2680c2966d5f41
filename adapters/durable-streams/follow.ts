/**
 * A general Durable Stream as `GET /v1/follow` holds it (`ds:{path}`, the path after `/v1/stream/`):
 * one event (`message`) per message, its data the message as the stream's reads give it (a JSON
 * stream's message as JSON, a `text/*` one's as text, any other's as base64), its cursor the stream
 * offset after it. Access as the stream's own GET (stream-access.ts, general-streams.ts): a caller
 * that may not read it, like a stream that does not exist, is 404. An offset of an earlier epoch of
 * the stream (deleted and created again, a store that lost writes) is what the GET answers with 410:
 * here an event (`gap`), after which the stream starts over from `-1`; a stream deleted while
 * followed is told once (`gone`) and then stays quiet.
 */
import type { Principal } from '../../src/auth/principal.js';
import type { FollowEvent, FollowOpen, FollowSource } from '../../src/http/surface.js';
import { resolveOffset } from '../../src/streams/forks.js';
import type { StreamStore } from '../../src/streams/types.js';
import { generalStreamPath } from './general-streams.js';
import { mayUseStreams } from './stream-access.js';
import { offsetAt } from './stream-headers.js';
import { isJsonMode, parseReadOffset, sseBase64 } from './stream-input.js';

const GONE = 'the stream was deleted';
/** About as many bytes as one read of the stream's GET answers. */
const PAGE_BYTES = 1024 * 1024;

const messageOf = (contentType: string, entry: Buffer): unknown => {
  if (isJsonMode(contentType)) return JSON.parse(entry.toString('utf8')) as unknown;
  return entry.toString(sseBase64(contentType) ? 'base64' : 'utf8');
};

const pause = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

export const durableStreamsFollow = (store: StreamStore): FollowSource => ({
  scheme: 'ds',
  open: async (principal: Principal, name: string, cursor: string): Promise<FollowOpen> => {
    const none: FollowOpen = { ok: false, status: 404, message: 'no such stream' };
    const path = mayUseStreams(principal, true) ? generalStreamPath(principal, name) : null;
    if (path === null) return none;
    const start = parseReadOffset([cursor]);
    if (!start.ok)
      return { ok: false, status: 400, message: 'the cursor must be -1, now or a stream offset' };
    const head = await store.head(path);
    if (!head || head.gone) return none;
    let from = '-1';
    if (start.value.kind === 'now') from = offsetAt(head, head.tail);
    else if (start.value.kind === 'at') {
      const at = resolveOffset(head, start.value.epoch, start.value.position);
      if ('code' in at && at.code !== 'offset_gone') return { ok: false, status: 400, message: at.message };
      from = cursor;
    }
    let toldGone = false;
    return {
      ok: true,
      cursor: from,
      target: {
        read: async (at, limit, waitMs, signal) => {
          if (toldGone) {
            await pause(waitMs, signal);
            return { events: [], cursor: at };
          }
          const parsed = parseReadOffset([at]);
          const offset = parsed.ok && parsed.value.kind === 'at' ? parsed.value : null;
          const gap = (): { events: FollowEvent[]; cursor: string } => ({
            events: [
              {
                event: 'gap',
                data: { code: 'offset_gone', message: 'offset from an earlier epoch of this stream' },
                cursor: '-1',
              },
            ],
            cursor: '-1',
          });
          const readAt = async () => {
            const meta = await store.head(path);
            if (!meta || meta.gone) return 'gone' as const;
            let position = 0;
            if (offset) {
              const verdict = resolveOffset(meta, offset.epoch, offset.position);
              if ('code' in verdict) return 'gap' as const;
              position = verdict.position;
            }
            const read = await store.read(path, position, limit, PAGE_BYTES);
            if (!read || read.meta.gone) return 'gone' as const;
            if (read.meta.epoch !== meta.epoch) return 'gap' as const;
            return { position, ...read };
          };
          let read = await readAt();
          if (typeof read === 'object' && read.entries.length === 0 && waitMs > 0 && !signal.aborted) {
            if (read.meta.closed) {
              // A closed stream's tail: nothing will come (the wait would wake at once, forever).
              await pause(waitMs, signal);
              return { events: [], cursor: at };
            }
            // At the tail: wait on the store (appends of every replica wake it), then read again.
            await store.waitAfter(path, read.position, waitMs, signal);
            read = await readAt();
          }
          if (read === 'gap') return gap();
          if (read === 'gone') {
            toldGone = true;
            return {
              events: [{ event: 'gone', data: { code: 'stream_gone', message: GONE }, cursor: at }],
              cursor: at,
            };
          }
          const { meta, entries } = read;
          let position = read.position;
          const events: FollowEvent[] = entries.map((entry) => ({
            event: 'message',
            data: messageOf(meta.contentType, entry),
            cursor: offsetAt(meta, ++position),
          }));
          return { events, cursor: offsetAt(meta, position) };
        },
      },
    };
  },
});
