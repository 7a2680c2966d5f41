import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { pacedListener } from '../../src/http/request-pacing.js';

interface Fake {
  id: number;
  req: IncomingMessage;
  res: ServerResponse;
}

const fake = (id: number, destroyed = false): Fake => ({
  id,
  req: { socket: { destroyed } } as unknown as IncomingMessage,
  res: {} as ServerResponse,
});

/** Busy for `ms` (the synchronous part of a request's handling). */
const burn = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('request pacing', () => {
  it('runs an ordinary turn at once: nothing waits', () => {
    const seen: number[] = [];
    const ids = new Map<IncomingMessage, number>();
    const paced = pacedListener((req) => seen.push(ids.get(req)!), 10);
    for (let i = 0; i < 20; i++) {
      const f = fake(i);
      ids.set(f.req, i);
      paced(f.req, f.res);
    }
    expect(seen).toEqual([...Array(20).keys()]);
    expect(paced.waiting).toBe(0);
  });

  it('past the budget, starts the rest in later turns, in arrival order, with the loop turning between', async () => {
    const events: string[] = [];
    const ids = new Map<IncomingMessage, number>();
    const paced = pacedListener((req) => {
      events.push(`req ${ids.get(req)}`);
      burn(2);
    }, 10);
    // A storm: 40 requests of 2 ms each in one turn, and something else due at the next turn.
    for (let i = 0; i < 40; i++) {
      const f = fake(i);
      ids.set(f.req, i);
      paced(f.req, f.res);
    }
    setImmediate(() => events.push('next turn'));
    const ranAtOnce = events.length;
    expect(ranAtOnce).toBeGreaterThanOrEqual(1);
    expect(ranAtOnce).toBeLessThan(40);
    expect(paced.waiting).toBe(40 - ranAtOnce);

    while (paced.waiting > 0) await turn();
    const order = events.filter((e) => e.startsWith('req')).map((e) => Number(e.slice(4)));
    expect(order).toEqual([...Array(40).keys()]);
    // What was due at the next turn ran before the storm was through: the loop was not held.
    const next = events.indexOf('next turn');
    expect(next).toBeGreaterThanOrEqual(ranAtOnce);
    expect(next).toBeLessThan(events.length - 1);
  });

  it('a request arriving while others wait queues behind them, even in a fresh turn', async () => {
    const order: number[] = [];
    const ids = new Map<IncomingMessage, number>();
    const paced = pacedListener((req) => {
      order.push(ids.get(req)!);
      burn(3);
    }, 5);
    const send = (i: number): void => {
      const f = fake(i);
      ids.set(f.req, i);
      paced(f.req, f.res);
    };
    for (let i = 0; i < 10; i++) send(i);
    expect(paced.waiting).toBeGreaterThan(0);
    await turn();
    send(10); // a new turn, but the queue is not empty: it must not overtake
    while (paced.waiting > 0) await turn();
    expect(order).toEqual([...Array(11).keys()]);
  });

  it('skips a request whose client went away while it waited', async () => {
    const seen: number[] = [];
    const ids = new Map<IncomingMessage, number>();
    const paced = pacedListener((req) => {
      seen.push(ids.get(req)!);
      burn(4);
    }, 5);
    const gone = new Set([5, 6]);
    for (let i = 0; i < 8; i++) {
      const f = fake(i, gone.has(i));
      ids.set(f.req, i);
      paced(f.req, f.res);
    }
    while (paced.waiting > 0) await turn();
    expect(seen).toEqual([0, 1, 2, 3, 4, 7]);
  });
});
