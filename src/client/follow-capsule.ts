/**
 * `followCapsule`: every record of a capsule's log once, in offset order, over SSE
 * (`GET …/records`) or long-poll (`GET …/poll`), which carry the same record objects, across
 * reconnects and switches. One connection at a time; each is tagged with a generation so a
 * late callback of a replaced connection can never deliver anything.
 */
import { authHeaders, HttpError, httpError, TicketSource } from './auth.js';
import { pollAnswer, recordsEvent, type PollBody, type Sink } from './capsule-records.js';
import { EventSourceFailed, openEventSource, openFetchSse, type SseConnection } from './sse-source.js';
import { DEFAULT_TUNING, jitteredBackoff, TransportPolicy } from './transport-policy.js';
import type { FollowCapsuleOptions, FollowState, Subscription, Transport } from './types.js';

/** The records stream's event names (EventSource can only listen to names it knows). */
const RECORDS_EVENTS = ['ready', 'record', 'gap'];

/** HTTP answers that no retry will change. */
const FATAL = new Set([400, 401, 403, 404]);

export const followCapsule = (options: FollowCapsuleOptions): Subscription => {
  const tuning = { ...DEFAULT_TUNING, ...options.tuning };
  const policy = new TransportPolicy(options.transport ?? 'auto', tuning);
  const base = options.gateway.replace(/\/+$/, '');
  const path = `${base}/murmur/${encodeURIComponent(options.capsule)}`;
  const tickets = options.useEventSource && options.token ? new TicketSource(base, options.token) : null;
  const sink: Sink = {
    cursor: options.after ?? 0,
    onRecord: (r) => options.onRecord(r),
    onGap: (g) => options.onGap?.(g),
  };
  let generation = 0;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let sse: SseConnection | null = null;
  let poll: AbortController | null = null;
  let lastState = '';
  /** The ticket the current SSE attempt carries, and whether it was fetched for it. */
  let ticketUsed: { ticket: string; fresh: boolean } | null = null;

  const state = (s: FollowState['state'], reason?: string): void => {
    const key = `${s}/${policy.transport}`;
    if (key === lastState && reason === undefined) return;
    lastState = key;
    options.onState?.({ state: s, transport: policy.transport, ...(reason ? { reason } : {}) });
  };
  const liveState = (): FollowState['state'] => (policy.fallback ? 'fallback' : 'live');

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
    state('connecting');
    const run = policy.transport === 'sse' ? openSse(gen) : pollLoop(gen);
    run.catch((err: unknown) => retry(gen, err));
  };

  /** After a failure: fatal answers end the subscription, anything else retries with backoff. */
  const retry = (gen: number, err: unknown): void => {
    if (gen !== generation || closed) return;
    if (err instanceof HttpError && FATAL.has(err.status)) {
      const used = ticketUsed;
      if (err.status === 401 && tickets && used) {
        tickets.invalidate();
        // A reused ticket may only be stale (clock skew, a restarted gateway with a new signing
        // key): try once more with a fresh one. A fresh ticket refused is final, so no loop.
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

  /**
   * What the gateway answers where an EventSource could not open (it hides the status): one
   * long-poll that does not wait, with the same credential. An HttpError, or null when it answered
   * (the failure was the connection's) or could not be reached.
   */
  const diagnose = async (ticket: string | null): Promise<HttpError | null> => {
    const url = `${path}/poll?after=${sink.cursor}&wait=0&limit=1${ticket ? `&ticket=${encodeURIComponent(ticket)}` : ''}`;
    try {
      const res = await fetch(url);
      if (!res.ok) return await httpError(res, 'sse');
      await res.body?.cancel();
    } catch {
      // unreachable: the EventSource's failure was the connection's, as it looked
    }
    return null;
  };

  const openSse = async (gen: number): Promise<void> => {
    let url = `${path}/records?after=${sink.cursor}`;
    const started = Date.now();
    let lastByte = started;
    let gotEvent = false;
    let healthy = false;
    /** After the stream ended on its own: count it for the policy, then reconnect. */
    const settle = (error: unknown, buffered: boolean): void => {
      const switched = policy.sseEnded({
        ageMs: Date.now() - started,
        idleMs: Date.now() - lastByte,
        buffered,
      });
      if (switched) state('fallback', switched);
      // A stream that delivered and was then cut is normal life behind a proxy: reconnect at once.
      if (error === null || gotEvent) {
        failures = 0;
        timer = setTimeout(connect, Math.random() * 50);
      } else retry(generation, error);
    };
    const onEnd = (error: unknown, buffered: boolean): void => {
      if (gen !== generation) return;
      stop();
      // A refusal is the gateway's answer, not a proxy's doing: it says nothing about SSE here.
      if (error instanceof HttpError && FATAL.has(error.status)) return retry(generation, error);
      if (error instanceof EventSourceFailed && error.beforeOpen) {
        // Whatever it was, the next attempt gets a fresh ticket; and find out whether it was a refusal.
        tickets?.invalidate();
        const g = generation;
        void diagnose(ticketUsed?.ticket ?? null).then((refusal) => {
          if (g !== generation || closed) return;
          if (refusal) retry(g, refusal);
          else settle(error, buffered);
        });
        return;
      }
      settle(error, buffered);
    };
    const handlers = {
      onOpen: () => undefined,
      onActivity: () => {
        lastByte = Date.now();
      },
      onEvent: (event: string, _id: string | null, data: string) => {
        if (gen !== generation) return;
        lastByte = Date.now();
        if (!gotEvent) {
          gotEvent = true;
          failures = 0;
          state('live');
        }
        recordsEvent(sink, event, data);
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
    sse =
      options.useEventSource && typeof EventSource !== 'undefined'
        ? openEventSource(url, RECORDS_EVENTS, handlers)
        : openFetchSse(url, headers, handlers);
    timer = setTimeout(() => {
      if (gen === generation && !gotEvent) onEnd(new Error('no byte in time'), true);
    }, tuning.firstByteMs);
    // Past youngMs the connection proves SSE works here (checked again on its end).
    setTimeout(() => {
      if (gen === generation && gotEvent && !healthy) {
        healthy = true;
        policy.sseHealthy();
      }
    }, tuning.youngMs);
  };

  const pollLoop = async (gen: number): Promise<void> => {
    while (gen === generation && !closed) {
      if (policy.shouldProbe(Date.now())) return connect();
      const hold = policy.pollHoldMs();
      const url = `${path}/poll?after=${sink.cursor}&wait=${hold / 1000}&limit=${tuning.pollLimit}`;
      const abort = new AbortController();
      poll = abort;
      const deadline = setTimeout(() => abort.abort(), hold + 15_000);
      const started = Date.now();
      let body: PollBody;
      try {
        const res = await fetch(url, { headers: await authHeaders(options.token), signal: abort.signal });
        if (!res.ok) throw await httpError(res, 'poll');
        body = (await res.json()) as PollBody;
      } catch (err) {
        if (gen !== generation) return;
        if (!(err instanceof HttpError)) policy.pollCut(Date.now() - started);
        throw err;
      } finally {
        clearTimeout(deadline);
      }
      if (gen !== generation) return;
      failures = 0;
      state(liveState());
      pollAnswer(sink, body);
    }
  };

  connect();

  return {
    get cursor() {
      return sink.cursor;
    },
    get transport(): Transport {
      return policy.transport;
    },
    close: () => finish('closed by the caller'),
  };
};
