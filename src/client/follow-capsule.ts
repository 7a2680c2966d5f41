/**
 * `followCapsule`: every record of a capsule's log once, in offset order, over SSE
 * (`GET …/records`) or long-poll (`GET …/poll`), which carry the same record objects, across
 * reconnects and switches. One connection at a time; each is tagged with a generation so a
 * late callback of a replaced connection can never deliver anything.
 */
import { httpError, type HttpError } from './auth.js';
import { pollAnswer, recordsEvent, type PollBody, type Sink } from './capsule-records.js';
import { followLoop } from './follow-loop.js';
import type { FollowCapsuleOptions, Subscription, Transport } from './types.js';

/** The records stream's event names (EventSource can only listen to names it knows). */
const RECORDS_EVENTS = ['ready', 'record', 'gap'];

export const followCapsule = (options: FollowCapsuleOptions): Subscription => {
  const path = `${options.gateway.replace(/\/+$/, '')}/murmur/${encodeURIComponent(options.capsule)}`;
  const sink: Sink = {
    cursor: options.after ?? 0,
    onRecord: (r) => options.onRecord(r),
    onGap: (g) => options.onGap?.(g),
  };

  const loop = followLoop<PollBody>(options, {
    sseUrl: () => `${path}/records?after=${sink.cursor}`,
    sseEvents: RECORDS_EVENTS,
    // A records stream may send nothing before its first event.
    liveBy: 'event',
    onEvent: (event, data) => recordsEvent(sink, event, data),
    // One long-poll that does not wait, with the same credential.
    diagnose: async (_url, ticket): Promise<HttpError | null> => {
      const url = `${path}/poll?after=${sink.cursor}&wait=0&limit=1${ticket ? `&ticket=${encodeURIComponent(ticket)}` : ''}`;
      try {
        const res = await fetch(url);
        if (!res.ok) return await httpError(res, 'sse');
        await res.body?.cancel();
      } catch {
        // unreachable: the EventSource's failure was the connection's, as it looked
      }
      return null;
    },
    pollUrl: (hold, limit) => `${path}/poll?after=${sink.cursor}&wait=${hold / 1000}&limit=${limit}`,
    onPoll: (body) => pollAnswer(sink, body),
  });
  loop.connect();

  return {
    get cursor() {
      return sink.cursor;
    },
    get transport(): Transport {
      return loop.transport;
    },
    close: () => loop.finish('closed by the caller'),
  };
};
