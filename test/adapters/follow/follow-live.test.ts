/**
 * `GET /v1/follow` at the head: many connections following the same capsules share ONE hub
 * subscription per capsule (no long-poll waiter per connection and stream), still get every record
 * once, in order, and hold no listener of their own on the gateway's shutdown signal (the eleventh
 * connection used to warn MaxListenersExceededWarning). The resume token is re-encoded one stream at
 * a time (`v2.`); a client still holding a token of the earlier form (`v1.`) resumes exactly.
 * Flue conversations and BeeOS channels likewise: every connection following them shares the
 * capsule's surface feed and the channel's projection, and resumes exactly from a mid-stream token.
 */
import { createFlueClient } from '@flue/sdk';
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { runBusy } from '../../client/busy-capsule.js';
import { loggedRecords } from '../../client/log-frames.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { beeosFeedStats } from '../../../adapters/beeos/channel-feeds.js';
import { collectSse, type SseEvent } from '../beeos/support/sse-client.js';
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
    const clients = [follow(url)];
    // The next connection opens once the last one is under way: each meets the feed somewhere else.
    while (clients.length < 6) {
      const last = clients[clients.length - 1]!;
      const seen = last.length;
      await expect.poll(() => last.length, { timeout: 20_000, interval: 5 }).toBeGreaterThan(seen + 3);
      clients.push(follow(url));
    }
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

  describe('flue: and beeos: streams', () => {
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

    const beeosPost = async (g: TestGateway, path: string, body: unknown) => {
      const res = await fetch(`${g.baseUrl}/api/v1/agents/cap1/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBeLessThan(300);
      return ((await res.json()) as { data: Record<string, string> }).data;
    };

    /** The conversation's messages as `…/events` streams them, once `replies` replies completed. */
    const beeosMessages = async (g: TestGateway, conv: string, replies: number): Promise<unknown[]> => {
      const completed = (seen: SseEvent[]) =>
        seen.filter(
          (e) => e.event === 'message' && /"agent_reply"/.test(e.data) && /"completed"/.test(e.data),
        ).length;
      const seen: SseEvent[] = [];
      const r = await collectSse(
        `${g.baseUrl}/api/v1/agents/cap1/conversations/${conv}/events?since=0`,
        {},
        (ev) => {
          seen.push(ev);
          return completed(seen) >= replies;
        },
      );
      return r.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as unknown);
    };

    type Got = (Delivered & { id: string })[];
    const flueKey = 'flue:cap0/chat';
    const ofFlue = (got: Got) => got.filter((d) => d.stream === flueKey);
    const flueChunks = (got: Got) => ofFlue(got).flatMap((d) => d.data as unknown as unknown[]);
    const ofBeeos = (got: Got, key: string) => got.filter((d) => d.stream === key);

    it('twelve connections following a Flue conversation and a BeeOS conversation: one hub subscription per capsule, every event once, in order; a mid-stream token resumes exactly', async () => {
      const g = await start(2);
      await say(g, 'chat', 3);
      const conv = (await beeosPost(g, 'conversations', {})).conversation_id!;
      await beeosPost(g, `conversations/${conv}/messages`, { message: script(3) });
      await beeosMessages(g, conv, 1);
      const beeosKey = `beeos:cap1/conversations/${conv}`;
      const url = `${g.baseUrl}/v1/follow?stream=${flueKey}@-1&stream=${beeosKey}@-1`;
      const clients = Array.from({ length: 12 }, () => follow(url));
      const hub = g.gateway.hub;
      const live = () => ['cap0', 'cap1'].map((c) => hub.capsuleStats(c));
      // Every stream of every connection at the head: pushed from one subscription per capsule, and
      // the twelve BeeOS readers share one projection of the conversation.
      await expect.poll(live, { timeout: 15_000, interval: 20 }).toMatchObject([
        { subscribers: 1, waiters: 0 },
        { subscribers: 1, waiters: 0 },
      ]);
      await expect
        .poll(() => beeosFeedStats('cap1'), { timeout: 10_000, interval: 20 })
        .toMatchObject({ feeds: 1, subscriptions: 1, projections: 1, listeners: 12 });
      await Promise.all([
        say(g, 'chat', 40),
        beeosPost(g, `conversations/${conv}/messages`, { message: script(40) }),
      ]);
      const flueExpected = await allUpdates(g, 'chat');
      const beeosExpected = await beeosMessages(g, conv, 2);
      await expect
        .poll(
          () =>
            clients.every(
              (got) =>
                flueChunks(got).length >= flueExpected.length &&
                ofBeeos(got, beeosKey).length >= beeosExpected.length,
            ),
          { timeout: 30_000, interval: 50 },
        )
        .toBe(true);
      for (const got of clients) {
        expect(flueChunks(got)).toEqual(flueExpected);
        const flueCursors = ofFlue(got).map((d) => d.cursor);
        expect(new Set(flueCursors).size).toBe(flueCursors.length);
        expect([...flueCursors].sort()).toEqual(flueCursors);
        const mine = ofBeeos(got, beeosKey);
        expect(mine.every((d) => d.event === 'message' && d.cursor === String(d.data.offset))).toBe(true);
        expect(mine.map((d) => d.data)).toEqual(beeosExpected);
      }
      expect(live()).toMatchObject([
        { subscribers: 1, waiters: 0 },
        { subscribers: 1, waiters: 0 },
      ]);

      // A token from the middle of the first connection's events resumes every stream exactly.
      const first = clients[0]!;
      const middle = first[Math.floor(first.length / 2)]!;
      const upToMiddle = first.slice(0, first.indexOf(middle) + 1);
      const strip = (ds: Got) =>
        ds.map(({ stream, cursor, event, data }) => ({ stream, cursor, event, data }));
      const rest = (key: string) =>
        strip(first.filter((d) => d.stream === key)).slice(upToMiddle.filter((d) => d.stream === key).length);
      const resumed = follow(url, { 'last-event-id': middle.id });
      await expect
        .poll(
          () =>
            ofFlue(resumed).length >= rest(flueKey).length &&
            ofBeeos(resumed, beeosKey).length >= rest(beeosKey).length,
          { timeout: 20_000, interval: 50 },
        )
        .toBe(true);
      expect(rest(flueKey).length + rest(beeosKey).length).toBeGreaterThan(0);
      expect(strip(ofFlue(resumed))).toEqual(rest(flueKey));
      expect(strip(ofBeeos(resumed, beeosKey))).toEqual(rest(beeosKey));

      // The last connection gone, each capsule's subscription goes with it (Flue's after its linger).
      sources.splice(0).forEach((es) => es.close());
      await expect
        .poll(() => beeosFeedStats('cap1'), { timeout: 10_000, interval: 20 })
        .toMatchObject({ feeds: 0, listeners: 0 });
    }, 90_000);
  });
});
