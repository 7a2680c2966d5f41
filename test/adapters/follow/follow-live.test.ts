/**
 * `GET /v1/follow` at the head: many connections following the same capsules share ONE hub
 * subscription per capsule (no long-poll waiter per connection and stream), still get every record
 * once, in order, and hold no listener of their own on the gateway's shutdown signal (the eleventh
 * connection used to warn MaxListenersExceededWarning). The resume token is re-encoded one stream at
 * a time (`v2.`); a client still holding a token of the earlier form (`v1.`) resumes exactly.
 * Flue conversations likewise: every connection following them shares the capsule's Flue feed and
 * the conversation's projection, and resumes exactly from a mid-stream token.
 */
import { createFlueClient } from '@flue/sdk';
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { runBusy } from '../../client/busy-capsule.js';
import { loggedRecords } from '../../client/log-frames.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { followError, getJson, quickRetryFetch } from './follow-support.js';

const sims: SimulatedCapsule[] = [];
const sources: EventSource[] = [];
let gw: TestGateway | null = null;
afterEach(async () => {
  sources.splice(0).forEach((es) => es.close());
  await gw?.close();
  await Promise.all(sims.splice(0).map((s) => s.stop()));
  gw = null;
});

const start = async (n: number): Promise<TestGateway> => {
  const capsules: Record<string, string> = {};
  for (let i = 0; i < n; i++) {
    const sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'queue' });
    sims.push(sim);
    capsules[`cap${i}`] = sim.url;
  }
  gw = await startTestGateway({ capsules, config: { longPollMaxMs: 2_000 } });
  return gw;
};

interface Delivered {
  stream: string;
  cursor: string;
  event: string;
  data: { offset: number } & Record<string, unknown>;
}

/** Open an EventSource on `url`; its events go to the returned list (with each event's `id:`). */
const follow = (url: string, headers: Record<string, string> = {}) => {
  const got: (Delivered & { id: string })[] = [];
  const quick = quickRetryFetch();
  const es = new EventSource(url, {
    fetch: (input, init) => quick(input, { ...init, headers: { ...init?.headers, ...headers } }),
  });
  es.onmessage = (e) => got.push({ ...(JSON.parse(e.data) as Delivered), id: e.lastEventId });
  sources.push(es);
  return got;
};

/**
 * `count` connections on `url`, each opened once the last one has received a few more events: every
 * one meets the shared feed somewhere else.
 */
const followOneAfterAnother = async (url: string, count: number) => {
  const clients = [follow(url)];
  while (clients.length < count) {
    const last = clients[clients.length - 1]!;
    const seen = last.length;
    await expect.poll(() => last.length, { timeout: 20_000, interval: 5 }).toBeGreaterThan(seen + 3);
    clients.push(follow(url));
  }
  return clients;
};

/** The offset the gateway logged a capsule's frame `data` at, once it has. */
const offsetOf = async (g: TestGateway, capsule: string, data: string): Promise<number> => {
  let at = -1;
  await expect
    .poll(
      async () =>
        (at =
          ((await loggedRecords(g.core, capsule)).findLast((r) => r.data === data)?.offset as number) ?? -1),
      { timeout: 10_000, interval: 20 },
    )
    .toBeGreaterThan(0);
  return at;
};

describe('GET /v1/follow at the head', () => {
  it('twelve connections on two capsules: one hub subscription per capsule, every record once, in order, no listener warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => {
      if (w.name === 'MaxListenersExceededWarning') warnings.push(w);
    };
    process.on('warning', onWarning);
    try {
      const g = await start(2);
      const url = `${g.baseUrl}/v1/follow?stream=murmur:cap0@-1&stream=murmur:cap1@-1`;
      const clients = Array.from({ length: 12 }, () => follow(url));
      const hub = g.gateway.hub;
      const live = () => ['cap0', 'cap1'].map((c) => hub.capsuleStats(c));
      // Every stream of every connection at the head: pushed from one subscription per capsule.
      await expect.poll(live, { timeout: 10_000, interval: 20 }).toMatchObject([
        { subscribers: 1, waiters: 0 },
        { subscribers: 1, waiters: 0 },
      ]);
      const [last0, last1] = await Promise.all([runBusy(sims[0]!, 3, 20, 5), runBusy(sims[1]!, 3, 20, 5)]);
      const upTo = {
        cap0: await offsetOf(g, 'cap0', last0.data),
        cap1: await offsetOf(g, 'cap1', last1.data),
      };
      const reached = (got: Delivered[], k: 'cap0' | 'cap1') =>
        got.some((d) => d.stream === `murmur:${k}` && d.data.offset >= upTo[k]);
      await expect
        .poll(() => clients.every((got) => reached(got, 'cap0') && reached(got, 'cap1')), {
          timeout: 30_000,
          interval: 50,
        })
        .toBe(true);
      const logged = {
        cap0: await loggedRecords(g.core, 'cap0', upTo.cap0),
        cap1: await loggedRecords(g.core, 'cap1', upTo.cap1),
      };
      for (const got of clients)
        for (const k of ['cap0', 'cap1'] as const) {
          const mine = got.filter((d) => d.stream === `murmur:${k}` && d.data.offset <= upTo[k]);
          expect(mine.every((d) => d.event === 'record' && d.cursor === String(d.data.offset))).toBe(true);
          expect(mine.map((d) => d.data)).toEqual(logged[k]);
        }
      expect(live()).toMatchObject([
        { subscribers: 1, waiters: 0 },
        { subscribers: 1, waiters: 0 },
      ]);
      // The last connection gone, the capsule's subscription goes with it.
      sources.splice(0).forEach((es) => es.close());
      await expect
        .poll(live, { timeout: 10_000, interval: 20 })
        .toMatchObject([{ subscribers: 0 }, { subscribers: 0 }]);
      await new Promise((r) => setImmediate(r));
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  }, 60_000);

  it('connections joining one after another while the capsule writes: each joins the shared feed and gets every record once, in order', async () => {
    const g = await start(1);
    const url = `${g.baseUrl}/v1/follow?stream=murmur:cap0@-1`;
    const busy = runBusy(sims[0]!, 4, 30, 3);
    const clients = await followOneAfterAnother(url, 6);
    const last0 = await busy;
    const upTo = await offsetOf(g, 'cap0', last0.data);
    await expect
      .poll(() => clients.every((got) => got.some((d) => d.data.offset >= upTo)), {
        timeout: 30_000,
        interval: 50,
      })
      .toBe(true);
    const logged = await loggedRecords(g.core, 'cap0', upTo);
    for (const got of clients)
      expect(got.filter((d) => d.data.offset <= upTo).map((d) => d.data)).toEqual(logged);
    expect(g.gateway.hub.capsuleStats('cap0')).toMatchObject({ subscribers: 1, waiters: 0 });
  }, 60_000);

  it('resumes every stream exactly from a token, of the current form or of the earlier one', async () => {
    const g = await start(2);
    const url = `${g.baseUrl}/v1/follow?stream=murmur:cap0@-1&stream=murmur:cap1@-1`;
    const first = follow(url);
    const [last0, last1] = await Promise.all([runBusy(sims[0]!, 1, 10, 2), runBusy(sims[1]!, 1, 10, 2)]);
    const upTo = { cap0: await offsetOf(g, 'cap0', last0.data), cap1: await offsetOf(g, 'cap1', last1.data) };
    await expect
      .poll(() => first.some((d) => d.stream === 'murmur:cap0' && d.data.offset >= upTo.cap0), {
        timeout: 20_000,
      })
      .toBe(true);
    await expect
      .poll(() => first.some((d) => d.stream === 'murmur:cap1' && d.data.offset >= upTo.cap1), {
        timeout: 20_000,
      })
      .toBe(true);
    sources.splice(0).forEach((es) => es.close());
    // A token from the middle: every stream's cursor as it stood after that event.
    const middle = first[Math.floor(first.length / 2)]!;
    expect(middle.id.startsWith('v2.')).toBe(true);
    const cursors = ['cap0', 'cap1'].map((k) => {
      const before = first.slice(0, first.indexOf(middle) + 1).filter((d) => d.stream === `murmur:${k}`);
      return before.length > 0 ? before[before.length - 1]!.cursor : '0';
    });
    expect(middle.id).toBe(`v2.${cursors.map((c) => Buffer.from(c).toString('base64url')).join('.')}`);
    const v1 = `v1.${Buffer.from(JSON.stringify(cursors)).toString('base64url')}`;
    const expected = {
      cap0: await loggedRecords(g.core, 'cap0', upTo.cap0),
      cap1: await loggedRecords(g.core, 'cap1', upTo.cap1),
    };
    for (const token of [middle.id, v1]) {
      const resumed = follow(url, { 'last-event-id': token });
      await expect
        .poll(
          () =>
            (['cap0', 'cap1'] as const).every((k) =>
              resumed.some((d) => d.stream === `murmur:${k}` && d.data.offset >= upTo[k]),
            ),
          { timeout: 20_000 },
        )
        .toBe(true);
      sources.splice(0).forEach((es) => es.close());
      for (const [i, k] of (['cap0', 'cap1'] as const).entries()) {
        const mine = resumed.filter((d) => d.stream === `murmur:${k}` && d.data.offset <= upTo[k]);
        expect(mine.map((d) => d.data)).toEqual(
          expected[k].filter((r) => (r.offset as number) > Number(cursors[i])),
        );
      }
    }
  }, 60_000);

  it('refuses a token that does not fit the streams, of either form, with the exact error', async () => {
    const g = await start(1);
    const url = `${g.baseUrl}/v1/follow?stream=murmur:cap0@-1&stream=murmur:cap1@-1`;
    const bad = followError(400, 'bad_request', 'Last-Event-ID is not a token of these streams');
    const b64 = (s: string) => Buffer.from(s).toString('base64url');
    for (const token of [
      `v2.${b64('1')}`, // one cursor for two streams
      `v2.${b64('1')}.${b64('2')}.${b64('3')}`,
      `v2.${b64('1')}.M=`, // not base64url
      `v2.${b64('1')}.MR`, // not the canonical spelling of any cursor
      `v2.${b64('1')}.`, // an empty cursor
      `v1.${b64('["1"]')}`,
      `v3.${b64('1')}.${b64('2')}`,
    ]) {
      const res = await fetch(url, { headers: { 'last-event-id': token } });
      expect({ status: res.status, body: (await res.json()) as unknown }).toEqual(bad);
    }
    // Nothing was opened for them: the same URL without a token is answered as usual.
    expect(await getJson(`${g.baseUrl}/v1/follow?stream=murmur:cap0@-1&live=long-poll&wait=0`)).toMatchObject(
      {
        status: 200,
      },
    );
  });

  describe('flue: streams', () => {
    const script = (chunks: number) => `#sim ${JSON.stringify({ chunks, thinking: 1, delayMs: 5 })}`;

    /** A Flue message on cap0's conversation `conv`, answered in `chunks` chunks; resolves when done. */
    const say = async (g: TestGateway, conv: string, chunks: number): Promise<void> => {
      const c = createFlueClient({ url: `${g.baseUrl}/flue/cap0/${conv}` });
      await c.wait(await c.send({ message: { kind: 'user', body: script(chunks) } }));
    };

    /** Every chunk `?view=updates` gives from `-1`, page after page until up to date. */
    const allUpdates = async (g: TestGateway, conv: string): Promise<unknown[]> => {
      const out: unknown[] = [];
      let offset = '-1';
      for (let page = 0; page < 1000; page++) {
        const res = await fetch(`${g.baseUrl}/flue/cap0/${conv}?view=updates&offset=${offset}`);
        expect(res.status).toBe(200);
        out.push(...((await res.json()) as unknown[]));
        offset = res.headers.get('stream-next-offset')!;
        if (res.headers.get('stream-up-to-date') === 'true') return out;
      }
      throw new Error('never up to date');
    };

    type Got = (Delivered & { id: string })[];
    const flueKey = 'flue:cap0/chat';
    const otherKey = 'flue:cap0/other';
    const of = (got: Got, key: string) => got.filter((d) => d.stream === key);
    const chunks = (got: Got, key: string) => of(got, key).flatMap((d) => d.data as unknown as unknown[]);
    const strip = (ds: Got) => ds.map(({ stream, cursor, event, data }) => ({ stream, cursor, event, data }));

    it('twelve connections following two Flue conversations: one hub subscription per capsule, no waiter, every chunk once, in order; a mid-stream token resumes exactly', async () => {
      const g = await start(1);
      await say(g, 'chat', 3);
      await say(g, 'other', 2);
      const url = `${g.baseUrl}/v1/follow?stream=${flueKey}@-1&stream=${otherKey}@-1`;
      const clients = Array.from({ length: 12 }, () => follow(url));
      const live = () => g.gateway.hub.capsuleStats('cap0');
      // Every stream of every connection at the head: pushed from the capsule's one Flue feed.
      await expect
        .poll(live, { timeout: 15_000, interval: 20 })
        .toMatchObject({ subscribers: 1, waiters: 0 });
      await Promise.all([say(g, 'chat', 40), say(g, 'other', 20)]);
      const expected: Record<string, unknown[]> = {
        [flueKey]: await allUpdates(g, 'chat'),
        [otherKey]: await allUpdates(g, 'other'),
      };
      await expect
        .poll(
          () =>
            clients.every((got) =>
              [flueKey, otherKey].every((k) => chunks(got, k).length >= expected[k]!.length),
            ),
          { timeout: 30_000, interval: 50 },
        )
        .toBe(true);
      for (const got of clients)
        for (const k of [flueKey, otherKey]) {
          expect(chunks(got, k)).toEqual(expected[k]);
          const cursors = of(got, k).map((d) => d.cursor);
          expect(new Set(cursors).size).toBe(cursors.length);
          expect([...cursors].sort()).toEqual(cursors);
        }
      expect(live()).toMatchObject({ subscribers: 1, waiters: 0 });

      // A token from the middle of the first connection's events resumes every stream exactly.
      const first = clients[0]!;
      const middle = first[Math.floor(first.length / 2)]!;
      const upToMiddle = first.slice(0, first.indexOf(middle) + 1);
      const rest = (key: string) => strip(of(first, key)).slice(of(upToMiddle, key).length);
      const resumed = follow(url, { 'last-event-id': middle.id });
      await expect
        .poll(() => [flueKey, otherKey].every((k) => of(resumed, k).length >= rest(k).length), {
          timeout: 20_000,
          interval: 50,
        })
        .toBe(true);
      expect(rest(flueKey).length + rest(otherKey).length).toBeGreaterThan(0);
      for (const k of [flueKey, otherKey]) expect(strip(of(resumed, k))).toEqual(rest(k));
    }, 90_000);

    it('connections joining one after another while a Flue conversation is written: each gets every chunk once, in order', async () => {
      const g = await start(1);
      await say(g, 'chat', 1);
      const url = `${g.baseUrl}/v1/follow?stream=${flueKey}@-1`;
      const turns = (async () => {
        for (let i = 0; i < 4; i++) await say(g, 'chat', 40);
      })();
      const clients = await followOneAfterAnother(url, 6);
      await turns;
      const expected = await allUpdates(g, 'chat');
      await expect
        .poll(() => clients.every((got) => chunks(got, flueKey).length >= expected.length), {
          timeout: 30_000,
          interval: 50,
        })
        .toBe(true);
      for (const got of clients) expect(chunks(got, flueKey)).toEqual(expected);
      await expect
        .poll(() => g.gateway.hub.capsuleStats('cap0'), { timeout: 15_000, interval: 20 })
        .toMatchObject({ subscribers: 1, waiters: 0 });
    }, 90_000);
  });
});
