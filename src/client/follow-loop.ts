/**
 * The reconnect loop `followCapsule` and `followMany` share: one connection at a time, SSE or
 * long-poll as the transport policy says (falling back to long-poll where something in between
 * breaks SSE, probing SSE again later), a jittered backoff after failures, a fresh ticket once when
 * the gateway refuses a reused one, and an end on answers no retry changes. Each connection is
 * tagged with a generation, so a late callback of a replaced connection can never deliver anything.
 *
 * What differs between surfaces is the `FollowTarget`: the URLs, what an event or a poll answer
 * delivers (and so where the next connection resumes: the caller's cursors, never the SSE id), and
 * what first proves a stream alive.
 */
import { authHeaders, HttpError, httpError, TicketSource } from './auth.js';
import { EventSourceFailed, openEventSource, openFetchSse, type SseConnection } from './sse-source.js';
import { DEFAULT_TUNING, jitteredBackoff, TransportPolicy } from './transport-policy.js';
import type { FollowCapsuleOptions, FollowState, Transport } from './types.js';

/** HTTP answers that no retry will change. */
const FATAL = new Set([400, 401, 403, 404]);

export interface FollowTarget<PollBody> {
  /** The SSE URL from the caller's cursors now (a ticket is appended as `&ticket=`). */
  sseUrl(): string;
  /** The event names an EventSource must listen to (it hears only names it knows). */
  sseEvents: readonly string[];
  /**
   * What first proves a stream alive: `event`, its first event (a records stream may send nothing
   * before one); `byte`, its first byte (the gateway writes a heartbeat as soon as it opens, so an
   * opened stream is live and a young one proves SSE works by its age alone).
   */
  liveBy: 'event' | 'byte';
  /** One SSE event, delivered (moving the caller's cursors). */
  onEvent(event: string, data: string): void;
  /**
   * What the gateway answers where an EventSource could not open (it hides the status): an
   * HttpError, or null when it answered (the failure was the connection's) or could not be reached.
   */
  diagnose(sseUrl: string, ticket: string | null): Promise<HttpError | null>;
  /** The long-poll URL from the caller's cursors now, holding at most `holdMs`, `limit` per page. */
  pollUrl(holdMs: number, limit: number): string;
  /** One long-poll answer, delivered (moving the caller's cursors). */
  onPoll(body: PollBody): void;
}

/** What every subscription's options say about its connection (followCapsule's, followMany's). */
export type FollowConnectionOptions = Pick<
  FollowCapsuleOptions,
  'gateway' | 'transport' | 'token' | 'onState' | 'useEventSource' | 'tuning'
>;

export interface FollowLoop {
  readonly closed: boolean;
  /** The transport in use right now. */
  readonly transport: Transport;
  /** Open the next connection (the current one, if any, must be stopped first). */
  connect(): void;
  /** End the current connection, whatever it is doing; its late callbacks deliver nothing. */
  stop(): void;
  /** End for good, with the state `closed` and its reason. */
  finish(reason: string): void;
}

/**
 * The loop for `target` (opened by `connect()`). `idle`: nothing to follow now, so no connection is
 * opened and the state is `live`.
 */
export const followLoop = <PollBody>(
  o: FollowConnectionOptions,
  target: FollowTarget<PollBody>,
  idle?: () => boolean,
): FollowLoop => {
  const tuning = { ...DEFAULT_TUNING, ...o.tuning };
  const policy = new TransportPolicy(o.transport ?? 'auto', tuning);
  // An EventSource cannot send a header: it authenticates with short-lived tickets.
  const tickets =
    o.useEventSource && o.token ? new TicketSource(o.gateway.replace(/\/+$/, ''), o.token) : null;
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
    o.onState?.({ state: s, transport: policy.transport, ...(reason ? { reason } : {}) });
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
    if (idle?.()) return state('live');
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

  const openSse = async (gen: number): Promise<void> => {
    let url = target.sseUrl();
    const started = Date.now();
    let lastByte = started;
    let gotEvent = false;
    let sawByte = false;
    let healthy = false;
    const viaEventSource = !!o.useEventSource && typeof EventSource !== 'undefined';
    const byByte = target.liveBy === 'byte';
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
        void target.diagnose(url, ticketUsed?.ticket ?? null).then((refusal) => {
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
        if (!byByte) return;
        // An EventSource shows events only: its opening is the first sign of life it gives.
        if (viaEventSource) sawByte = true;
        // Open: every stream is live (a quiet one may send nothing for long).
        if (gen === generation && !gotEvent) state(liveState());
      },
      onActivity: () => {
        lastByte = Date.now();
        sawByte = true;
      },
      onEvent: (event: string, _id: string | null, data: string) => {
        if (gen !== generation) return;
        lastByte = Date.now();
        if (!gotEvent) {
          gotEvent = true;
          failures = 0;
          state('live');
        }
        target.onEvent(event, data);
      },
      onClose: (error: unknown) => onEnd(error, false),
    };
    if (tickets) {
      const taken = await tickets.take();
      if (gen !== generation) return;
      ticketUsed = taken;
      url += `&ticket=${encodeURIComponent(taken.ticket)}`;
    }
    const headers = tickets ? {} : await authHeaders(o.token);
    if (gen !== generation) return;
    sse = viaEventSource
      ? openEventSource(url, target.sseEvents, handlers)
      : openFetchSse(url, headers, handlers);
    // Nothing by firstByteMs means something in between holds the stream back.
    timer = setTimeout(() => {
      if (gen === generation && !(byByte ? sawByte : gotEvent)) onEnd(new Error('no byte in time'), true);
    }, tuning.firstByteMs);
    // Past youngMs the connection proves SSE works here (checked again on its end).
    setTimeout(() => {
      if (gen !== generation || healthy) return;
      if (byByte ? Date.now() - started >= tuning.youngMs : gotEvent) {
        healthy = true;
        policy.sseHealthy();
      }
    }, tuning.youngMs);
  };

  const pollLoop = async (gen: number): Promise<void> => {
    while (gen === generation && !closed) {
      if (policy.shouldProbe(Date.now())) return connect();
      const hold = policy.pollHoldMs();
      const url = target.pollUrl(hold, tuning.pollLimit);
      const abort = new AbortController();
      poll = abort;
      const deadline = setTimeout(() => abort.abort(), hold + 15_000);
      const started = Date.now();
      let body: PollBody;
      try {
        const res = await fetch(url, { headers: await authHeaders(o.token), signal: abort.signal });
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
      target.onPoll(body);
    }
  };

  return {
    get closed() {
      return closed;
    },
    get transport() {
      return policy.transport;
    },
    connect,
    stop,
    finish,
  };
};
