/**
 * Request pacing for storms. When thousands of requests arrive in one event-loop turn (clients
 * reconnecting at once after a restart or a failover), libuv's poll phase runs every one of them
 * before the turn ends, and nothing queued meanwhile is written until it does: the resume-storm
 * bench saw one stall of 2.5–3.5 s per storm in which no client received a byte, no connection was
 * accepted and every other stream of the replica waited. Past `budgetMs` of a turn, further
 * requests wait in arrival order and are started in later turns, `budgetMs` at a time, so what the
 * earlier ones queued (and drains, accepts, live fan-out) goes out in between. An ordinary turn
 * never reaches the budget and nothing waits.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** A turn's request handling beyond this waits for the next turns. */
const REQUEST_BUDGET_MS = 10;

export interface PacedListener extends RequestListener {
  /** Requests waiting for a later turn. */
  readonly waiting: number;
}

export const pacedListener = (listener: RequestListener, budgetMs = REQUEST_BUDGET_MS): PacedListener => {
  /** When this turn's first request came (performance.now()), or -1 before it. */
  let turnStart = -1;
  // A FIFO as an array and a head index: shift() on thousands of entries is quadratic.
  let queue: ([IncomingMessage, ServerResponse] | undefined)[] = [];
  let head = 0;
  let draining = false;

  const endTurn = (): void => {
    turnStart = -1;
  };

  const drain = (): void => {
    const start = performance.now();
    while (head < queue.length) {
      const [req, res] = queue[head]!;
      queue[head++] = undefined;
      // A client that gave up while it waited (a storm's clients time out and retry) costs nothing.
      if (!req.socket.destroyed) listener(req, res);
      if (performance.now() - start >= budgetMs) break;
    }
    if (head < queue.length) {
      setImmediate(drain);
      return;
    }
    queue = [];
    head = 0;
    draining = false;
  };

  const paced = ((req: IncomingMessage, res: ServerResponse): void => {
    const now = performance.now();
    if (turnStart < 0) {
      turnStart = now;
      setImmediate(endTurn);
    }
    // Once some wait, every later one waits behind them: nobody overtakes.
    if (!draining && now - turnStart < budgetMs) return listener(req, res);
    queue.push([req, res]);
    if (!draining) {
      draining = true;
      setImmediate(drain);
    }
  }) as PacedListener;
  Object.defineProperty(paced, 'waiting', { get: () => queue.length - head });
  return paced;
};
