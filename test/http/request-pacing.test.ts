import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { pacedListener, type PacedListener } from '../../src/http/request-pacing.js';

/** Busy for `ms` (the synchronous part of a request's handling). */
const burn = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A paced listener whose requests are numbered: `events` records each one it starts (`req N`), and
 * each costs `burnMs` of synchronous work. `send(from, to, gone)` hands it requests from..to-1, in
 * one go, those in `gone` with their socket already closed.
 */
const storm = (budgetMs: number, burnMs: number) => {
  const events: string[] = [];
  const ids = new Map<IncomingMessage, number>();
  const paced: PacedListener = pacedListener((req) => {
    events.push(`req ${ids.get(req)}`);
    burn(burnMs);
  }, budgetMs);
  const send = (from: number, to: number, gone: ReadonlySet<number> = new Set()): void => {
    for (let i = from; i < to; i++) {
      const req = { socket: { destroyed: gone.has(i) } } as unknown as IncomingMessage;
      ids.set(req, i);
      paced(req, {} as ServerResponse);
    }
  };
  const started = (): number[] => events.filter((e) => e.startsWith('req')).map((e) => Number(e.slice(4)));
  const settled = async (): Promise<void> => {
    while (paced.waiting > 0) await turn();
  };
  return { events, paced, send, started, settled };
};

const upTo = (n: number): number[] => [...Array(n).keys()];

describe('request pacing', () => {
  it('runs an ordinary turn at once: nothing waits', () => {
    const s = storm(10, 0);
    s.send(0, 20);
    expect(s.started()).toEqual(upTo(20));
    expect(s.paced.waiting).toBe(0);
  });

  it('past the budget, starts the rest in later turns, in arrival order, with the loop turning between', async () => {
    const s = storm(10, 2);
    // A storm: 40 requests of 2 ms each in one turn, and something else due at the next turn.
    s.send(0, 40);
    setImmediate(() => s.events.push('next turn'));
    const ranAtOnce = s.events.length;
    expect(ranAtOnce).toBeGreaterThanOrEqual(1);
    expect(ranAtOnce).toBeLessThan(40);
    expect(s.paced.waiting).toBe(40 - ranAtOnce);

    await s.settled();
    expect(s.started()).toEqual(upTo(40));
    // What was due at the next turn ran before the storm was through: the loop was not held.
    const next = s.events.indexOf('next turn');
    expect(next).toBeGreaterThanOrEqual(ranAtOnce);
    expect(next).toBeLessThan(s.events.length - 1);
  });

  it('a request arriving while others wait queues behind them, even in a fresh turn', async () => {
    const s = storm(5, 3);
    s.send(0, 10);
    expect(s.paced.waiting).toBeGreaterThan(0);
    await turn();
    s.send(10, 11); // a new turn, but the queue is not empty: it must not overtake
    await s.settled();
    expect(s.started()).toEqual(upTo(11));
  });

  it('skips a request whose client went away while it waited', async () => {
    const s = storm(5, 4);
    s.send(0, 8, new Set([5, 6]));
    await s.settled();
    expect(s.started()).toEqual([0, 1, 2, 3, 4, 7]);
  });
});
