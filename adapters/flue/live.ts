/**
 * The two live read modes (§live=long-poll, §live=sse) over one projector. Every wait is one
 * `core.waitAfter` with the request's signal, so a client that leaves costs nothing. Response
 * headers and validation are routes.ts's concern.
 */
import type { AdapterConfig } from '../../src/http/adapter-deps.js';
import { linkSignals } from '../../src/core/linked-signal.js';
import type { GatewayCore } from '../../src/core/types.js';
import { encodeControlEvent, encodeDataEvent, encodeHeartbeat, formatOffset } from './codec.js';
import { UPDATES_PAGE } from './constants.js';
import { waitCycle, type Cycle } from './conversation-reader.js';
import type { ConversationProjector } from './projection.js';

export interface LiveContext {
  core: GatewayCore;
  config: AdapterConfig;
  capsule: string;
  projector: ConversationProjector;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
}

/**
 * §live=long-poll: answer as soon as chunks exist; hold otherwise until the window ends (then `[]`,
 * up to date). Batches of other contexts advance the offset without ending the hold, so a busy
 * capsule does not wake every parked client of a quiet conversation.
 */
export const longPoll = async (live: LiveContext, after: number): Promise<Cycle> => {
  const linked = linkSignals(live.signal, live.core.shutdownSignal);
  try {
    return await holdLongPoll(live, after, linked.signal);
  } finally {
    linked.release();
  }
};

const holdLongPoll = async (live: LiveContext, after: number, signal: AbortSignal): Promise<Cycle> => {
  const deadline = Date.now() + live.config.longPollMaxMs;
  let next = after;
  // Bounded by the deadline: each pass either returns or waits out part of the window.
  while (true) {
    const remaining = deadline - Date.now();
    if (remaining <= 0 || signal.aborted) return { chunks: [], next, upToDate: true };
    const cycle = await waitCycle(
      live.core,
      live.capsule,
      live.projector,
      next,
      UPDATES_PAGE,
      remaining,
      signal,
    );
    next = cycle.next;
    if (cycle.chunks.length > 0 || !cycle.upToDate) return cycle;
    if (cycle.timedOut) return { chunks: [], next, upToDate: true };
  }
};

/**
 * §live=sse: `event: data` per cycle with chunks, `event: control` after every cycle, an idle
 * `upToDate` control every `idleControlMs`, `: heartbeat` every `heartbeatMs` from open. Ends only
 * when the client leaves, the gateway drains, or the store generation changes (the reconnect then
 * gets 416 and restarts from -1).
 */
export const sseBody = (live: LiveContext, after: number): ReadableStream<Uint8Array> => {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  const stop = new AbortController();
  const linked = linkSignals(live.signal, live.core.shutdownSignal, stop.signal);
  const signal = linked.signal;
  const write = (text: string): Promise<void> =>
    writer.write(encoder.encode(text)).catch(() => {
      stop.abort();
    });
  const heartbeat = setInterval(() => void write(encodeHeartbeat()), live.config.heartbeatMs);
  const epoch = live.projector.epoch;

  const run = async (): Promise<void> => {
    let next = after;
    // Bounded by the signal: it aborts when the client leaves or the gateway drains.
    while (!signal.aborted) {
      const cycle = await waitCycle(
        live.core,
        live.capsule,
        live.projector,
        next,
        UPDATES_PAGE,
        live.config.idleControlMs,
        signal,
      );
      if (signal.aborted) break;
      next = cycle.next;
      if (cycle.chunks.length > 0) await write(encodeDataEvent(cycle.chunks));
      await write(encodeControlEvent(formatOffset(epoch, next), cycle.upToDate));
    }
  };

  void run()
    .catch(() => undefined)
    .finally(() => {
      clearInterval(heartbeat);
      stop.abort();
      linked.release();
      writer.close().catch(() => undefined);
    });
  return readable;
};
