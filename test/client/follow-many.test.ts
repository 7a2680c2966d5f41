/**
 * followMany in Node, on both transports: streams added and removed while messages keep coming
 * lose and repeat nothing (a stream kept gets every message once, in order; an added one from its
 * cursor; a removed one nothing after its removal); the cursors resume a new subscription exactly;
 * a refused stream closes the subscription with the gateway's answer.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followMany } from '../../src/client/follow-many.js';
import type { FollowManyEvent, FollowState } from '../../src/client/types.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({
    capsules: {},
    config: { longPollMaxMs: 1_000 },
    extra: { durableStreams: { writable: true } },
    tuning: { streams: { keyPrefix: `test:follow-many-client:${randomUUID()}` } },
  });
});
afterAll(async () => gw.close());

const put = async (path: string) =>
  expect(
    (
      await fetch(`${gw.baseUrl}/v1/stream/${path}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
      })
    ).status,
  ).toBe(201);
const append = async (path: string, n: number) =>
  expect(
    (
      await fetch(`${gw.baseUrl}/v1/stream/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify([n]),
      })
    ).status,
  ).toBe(204);
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe.each(['sse', 'long-poll'] as const)('followMany over %s', (transport) => {
  it('adding and removing streams while messages come loses and repeats nothing', async () => {
    const [a, b, c] = ['a', 'b', 'c'].map((x) => `${transport}/${x}`) as [string, string, string];
    for (const p of [a, b, c]) await put(p);
    const got: FollowManyEvent[] = [];
    const sub = followMany({
      gateway: gw.baseUrl,
      streams: { [`ds:${a}`]: '-1', [`ds:${b}`]: '-1' },
      transport,
      onEvent: (e) => got.push(e),
    });
    const of = (p: string) => got.filter((e) => e.stream === `ds:${p}`).map((e) => e.data);
    const total = 60;
    let atRemoval = -1;
    try {
      for (let n = 0; n < total; n++) {
        await Promise.all([append(a, n), append(b, n), append(c, n)]);
        if (n === 20) sub.add(`ds:${c}`, '-1');
        if (n === 40) {
          // Once b's 40th message is delivered, no more of b.
          await expect.poll(() => of(b).length, { timeout: 10_000, interval: 10 }).toBeGreaterThanOrEqual(41);
          atRemoval = of(b).length;
          sub.remove(`ds:${b}`);
        }
        if (n % 10 === 0) await new Promise((r) => setTimeout(r, 20));
      }
      await expect
        .poll(() => of(a).length >= total && of(c).length >= total, { timeout: 10_000, interval: 20 })
        .toBe(true);
      expect(of(a)).toEqual(range(0, total));
      expect(of(c)).toEqual(range(0, total));
      const bGot = of(b);
      expect(bGot).toEqual(range(0, bGot.length));
      // Nothing of b after its removal, though its messages kept coming.
      expect(bGot.length).toBe(atRemoval);
      expect(Object.keys(sub.cursors)).toEqual([`ds:${a}`, `ds:${c}`]);
      expect(sub.cursors[`ds:${a}`]).toBe(got.filter((e) => e.stream === `ds:${a}`).at(-1)!.cursor);
    } finally {
      sub.close();
    }
    // The cursors resume a new subscription exactly where the last one stopped.
    const resumed: FollowManyEvent[] = [];
    const again = followMany({
      gateway: gw.baseUrl,
      streams: sub.cursors,
      transport,
      onEvent: (e) => resumed.push(e),
    });
    try {
      await append(a, total);
      await expect.poll(() => resumed.length, { timeout: 10_000, interval: 10 }).toBeGreaterThan(0);
      await new Promise((r) => setTimeout(r, 100));
      expect(resumed.map((e) => [e.stream, e.data])).toEqual([[`ds:${a}`, total]]);
    } finally {
      again.close();
    }
  }, 30_000);

  it('a stream the gateway refuses closes the subscription with its answer', async () => {
    const states: FollowState[] = [];
    const sub = followMany({
      gateway: gw.baseUrl,
      streams: { 'ds:no/such': '-1' },
      transport,
      onEvent: () => undefined,
      onState: (s) => states.push(s),
    });
    await expect.poll(() => states.at(-1)?.state, { timeout: 10_000 }).toBe('closed');
    expect(states.at(-1)!.reason).toContain('404');
    expect(states.at(-1)!.reason).toContain('no such stream: ds:no/such');
    sub.close();
  });
});
