/**
 * `followMany`: many streams of any surface over one connection (`GET /v1/follow`), each event
 * once and in its stream's order, across reconnects, switches of transport (SSE, or long-poll behind
 * proxies that break it, as followCapsule does) and changes to the set of streams. The client keeps
 * every stream's cursor itself and opens each connection from them (not from the SSE token), so
 * adding or removing a stream is one reopen that neither loses nor repeats an event of the others.
 */
import { authHeaders, HttpError, httpError, TicketSource } from './auth.js';
import { canShare, followManyShared } from './follow-shared.js';
import { EventSourceFailed, openEventSource, openFetchSse, type SseConnection } from './sse-source.js';
import { DEFAULT_TUNING, jitteredBackoff, TransportPolicy } from './transport-policy.js';
import type {
  FollowManyEvent,
  FollowManyOptions,
  FollowManySubscription,
  FollowState,
  Transport,
} from './types.js';

/** HTTP answers that no retry will change. */
const FATAL = new Set([400, 401, 403, 404]);

interface LongPollBody {
  events: FollowManyEvent[];
  cursors: Record<string, string>;
}

export const followMany = (options: FollowManyOptions): FollowManySubscription => {
  // Tabs of one origin share one connection where the browser lets them (follow-shared.ts).
  if (options.share && canShare())
    return followManyShared({ ...options, share: undefined }, options.share, followMany);
  const tuning = { ...DEFAULT_TUNING, ...options.tuning };
  const policy = new TransportPolicy(options.transport ?? 'auto', tuning);
  const base = `${options.gateway.replace(/\/+$/, '')}/v1/follow`;
  const tickets =
    options.useEventSource && options.token
      ? new TicketSource(options.gateway.replace(/\/+$/, ''), options.token)
      : null;
  /** Every stream followed, in the order it was added, and its cursor after the last event delivered. */
  const cursors = new Map<string, string>(Object.entries(options.streams));
  let generation = 0;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let sse: SseConnection | null = null;
  let poll: AbortController | null = null;
  let lastState = '';
  let reopening = false;
  let ticketUsed: { ticket: string; fresh: boolean } | null = null;

  const state = (s: FollowState['state'], reason?: string): void => {
    const key = `${s}/${policy.transport}`;
    if (key === lastState && reason === undefined) return;
    lastState = key;
    options.onState?.({ state: s, transport: policy.transport, ...(reason ? { reason } : {}) });
  };

  const query = (): string =>
    [...cursors].map(([key, cursor]) => `stream=${encodeURIComponent(`${key}@${cursor}`)}`).join('&');

  /** One event of a stream still followed: its cursor moves first, so a throwing callback loses nothing. */
  const deliver = (ev: FollowManyEvent): void => {
    if (!cursors.has(ev.stream)) return;
    cursors.set(ev.stream, ev.cursor);
    options.onEvent(ev);
  };

  const stop = (): void => {
    generation++;
    if (timer) clearTimeout(timer);
    timer = null;
    sse?.close();
    sse = null;
    poll?.abort();
    poll = null;
  };

  const finish = (reason: string): void => {
    if (closed) return;
    stop();
    closed = true;
    state('closed', reason);
  };

  const connect = (): void => {
    if (closed) return;
    const gen = ++generation;
    ticketUsed = null;
    // Nothing to follow: no connection until a stream is added.
    if (cursors.size === 0) return state('live');
    state('connecting');
    const run = policy.transport === 'sse' ? openSse(gen) : pollLoop(gen);
    run.catch((err: unknown) => retry(gen, err));
  };

  /** After add/remove: one reopen from every stream's cursor, however many changes this turn made. */
  const reopen = (): void => {
    if (closed || reopening) return;
    reopening = true;
    queueMicrotask(() => {
      reopening = false;
      if (closed) return;
      stop();
      connect();
    });
  };

  const retry = (gen: number, err: unknown): void => {
    if (gen !== generation || closed) return;
    if (err instanceof HttpError && FATAL.has(err.status)) {
      const used = ticketUsed;
      if (err.status === 401 && tickets && used) {
        tickets.invalidate();
        if (!used.fresh) {
          state('connecting', 'the gateway refused the ticket: fetching a new one');
          timer = setTimeout(connect, Math.random() * 50);
          return;
        }
      }
      return finish(err.message);
    }
    const delay = jitteredBackoff(failures++, tuning, err instanceof HttpError ? err.retryAfterMs : null);
    state('connecting', err instanceof Error ? err.message : String(err));
    timer = setTimeout(connect, delay);
  };

  /** What the gateway answers where an EventSource failed before it opened (it hides the status). */
  const diagnose = async (url: string): Promise<HttpError | null> => {
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
  };

  const openSse = async (gen: number): Promise<void> => {
    let url = `${base}?${query()}`;
    const started = Date.now();
    let lastByte = started;
    let gotEvent = false;
    let sawByte = false;
    let healthy = false;
    const viaEventSource = !!options.useEventSource && typeof EventSource !== 'undefined';
    const settle = (error: unknown, buffered: boolean): void => {
      const switched = policy.sseEnded({
        ageMs: Date.now() - started,
        idleMs: Date.now() - lastByte,
        buffered,
      });
      if (switched) state('fallback', switched);
      if (error === null || gotEvent) {
        failures = 0;
        timer = setTimeout(connect, Math.random() * 50);
      } else retry(generation, error);
    };
    const onEnd = (error: unknown, buffered: boolean): void => {
      if (gen !== generation) return;
      stop();
      if (error instanceof HttpError && FATAL.has(error.status)) return retry(generation, error);
      if (error instanceof EventSourceFailed && error.beforeOpen) {
        tickets?.invalidate();
        const g = generation;
        void diagnose(url).then((refusal) => {
          if (g !== generation || closed) return;
          if (refusal) retry(g, refusal);
          else settle(error, buffered);
        });
        return;
      }
      settle(error, buffered);
    };
    const handlers = {
      onOpen: () => {
        // An EventSource shows events only: its opening is the first sign of life it gives.
        if (viaEventSource) sawByte = true;
        // Open: every stream is live (a quiet one may send nothing for long).
        if (gen === generation && !gotEvent) state(policy.fallback ? 'fallback' : 'live');
      },
      onActivity: () => {
        lastByte = Date.now();
        sawByte = true;
      },
      onEvent: (_event: string, _id: string | null, data: string) => {
        if (gen !== generation) return;
        lastByte = Date.now();
        if (!gotEvent) {
          gotEvent = true;
          failures = 0;
          state('live');
        }
        deliver(JSON.parse(data) as FollowManyEvent);
      },
      onClose: (error: unknown) => onEnd(error, false),
    };
    if (tickets) {
      const taken = await tickets.take();
      if (gen !== generation) return;
      ticketUsed = taken;
      url += `&ticket=${encodeURIComponent(taken.ticket)}`;
    }
    const headers = tickets ? {} : await authHeaders(options.token);
    if (gen !== generation) return;
    sse = viaEventSource ? openEventSource(url, ['message'], handlers) : openFetchSse(url, headers, handlers);
    // The gateway writes a heartbeat as soon as the stream opens: nothing by firstByteMs means
    // something in between holds the stream back.
    timer = setTimeout(() => {
      if (gen === generation && !sawByte) onEnd(new Error('no byte in time'), true);
    }, tuning.firstByteMs);
    setTimeout(() => {
      if (gen === generation && !healthy && Date.now() - started >= tuning.youngMs) {
        healthy = true;
        policy.sseHealthy();
      }
    }, tuning.youngMs);
  };

  const pollLoop = async (gen: number): Promise<void> => {
    while (gen === generation && !closed) {
      if (policy.shouldProbe(Date.now())) return connect();
      const hold = policy.pollHoldMs();
      const url = `${base}?${query()}&live=long-poll&wait=${hold / 1000}`;
      const abort = new AbortController();
      poll = abort;
      const deadline = setTimeout(() => abort.abort(), hold + 15_000);
      const started = Date.now();
      let body: LongPollBody;
      try {
        const res = await fetch(url, { headers: await authHeaders(options.token), signal: abort.signal });
        if (!res.ok) throw await httpError(res, 'poll');
        body = (await res.json()) as LongPollBody;
      } catch (err) {
        if (gen !== generation) return;
        if (!(err instanceof HttpError)) policy.pollCut(Date.now() - started);
        throw err;
      } finally {
        clearTimeout(deadline);
      }
      if (gen !== generation) return;
      failures = 0;
      state(policy.fallback ? 'fallback' : 'live');
      for (const ev of body.events) deliver(ev);
      // Streams that moved on without an event to show (past records they do not show).
      for (const [key, cursor] of Object.entries(body.cursors))
        if (cursors.has(key)) cursors.set(key, cursor);
    }
  };

  connect();

  return {
    get cursors() {
      return Object.fromEntries(cursors);
    },
    get transport(): Transport {
      return policy.transport;
    },
    add: (key, cursor = '-1') => {
      if (closed || cursors.has(key)) return;
      cursors.set(key, cursor);
      reopen();
    },
    remove: (key) => {
      if (closed || !cursors.delete(key)) return;
      reopen();
    },
    close: () => finish('closed by the caller'),
  };
};
