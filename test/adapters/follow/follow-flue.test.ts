/**
 * `flue:{capsule}/{conversation}` on `GET /v1/follow`: the conversation's update chunks, exactly the
 * ones `?view=updates` gives, through an EventSource that a proxy cuts every 300 ms (it reconnects
 * with nothing but `Last-Event-ID`); a long-poll resumed from the cursor of an event in the middle of
 * a page; owners' conversations apart; an offset of another generation or beyond the head is a
 * `gap` event and the stream starts over; every bad key or cursor refused with the exact error.
 */
import { createFlueClient } from '@flue/sdk';
import { EventSource } from 'eventsource';
import { describe, expect, it, vi } from 'vitest';
import { startCuttingProxy } from '../../client/cutting-proxy.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestGateway } from '../../support/gateway.js';
import {
  followError,
  getJson,
  quickRetryFetch,
  twoOwnersForFile,
  type FollowEventJson,
  type LongPoll,
} from './follow-support.js';

const ALICE = 'follow-flue-alice-key-0123456789';
const BOB = 'follow-flue-bob-key-0123456789';
const gw = twoOwnersForFile(ALICE, BOB);

const client = (conv: string, token: string) =>
  createFlueClient({
    url: `${gw().baseUrl}/flue/cap0/${conv}`,
    headers: { authorization: `Bearer ${token}` },
  });

/** A message the simulated capsule answers with `chunks` text chunks; resolves when it is done. */
const say = async (conv: string, token: string, chunks: number): Promise<void> => {
  const c = client(conv, token);
  const admission = await c.send({
    message: { kind: 'user', body: `#sim ${JSON.stringify({ chunks, thinking: 1, delayMs: 5 })}` },
  });
  await c.wait(admission);
};

/** Every chunk `?view=updates` gives from `-1`, page after page until up to date. */
const allUpdates = async (conv: string, token: string): Promise<unknown[]> => {
  const out: unknown[] = [];
  let offset = '-1';
  for (let page = 0; page < 1000; page++) {
    const res = await fetch(`${gw().baseUrl}/flue/cap0/${conv}?view=updates&offset=${offset}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    out.push(...((await res.json()) as unknown[]));
    offset = res.headers.get('stream-next-offset')!;
    if (res.headers.get('stream-up-to-date') === 'true') return out;
  }
  throw new Error('never up to date');
};

const url = (q: string) => `${gw().baseUrl}/v1/follow${q}`;

describe('flue:{capsule}/{conversation} on GET /v1/follow', () => {
  it('every chunk ?view=updates gives, once, in order, through an EventSource cut every 300 ms', async () => {
    await say('chat', ALICE, 5);
    // Bob's conversation of the same name is another one: none of its chunks reach Alice.
    await say('chat', BOB, 3);
    const proxy = await startCuttingProxy(gw().baseUrl, { lifetimeMs: 300 });
    const got: FollowEventJson<unknown[]>[] = [];
    const es = new EventSource(`${proxy.url}/v1/follow?stream=flue:cap0/chat@-1`, {
      fetch: quickRetryFetch(ALICE),
    });
    es.onmessage = (e) => got.push(JSON.parse(e.data) as FollowEventJson<unknown[]>);
    try {
      // Three turns at least, and on until the proxy has cut the follower a few times (bounded).
      for (let i = 0; i < 30 && (i < 3 || proxy.kills < 3); i++) await say('chat', ALICE, 40);
      const expected = await allUpdates('chat', ALICE);
      await expect
        .poll(() => got.flatMap((e) => e.data).length, { timeout: 30_000, interval: 50 })
        .toBeGreaterThanOrEqual(expected.length);
      expect(proxy.kills).toBeGreaterThan(1);
      expect(got.every((e) => e.stream === 'flue:cap0/chat' && e.event === 'data')).toBe(true);
      expect(got.flatMap((e) => e.data)).toEqual(expected);
      // Each event's cursor is a Flue offset, strictly rising.
      const cursors = got.map((e) => e.cursor);
      expect(cursors.every((c) => /^\d{16}_\d{16}$/.test(c))).toBe(true);
      expect([...cursors].sort()).toEqual(cursors);
      expect(new Set(cursors).size).toBe(cursors.length);
      expect(await allUpdates('chat', BOB)).not.toEqual(expected);
    } finally {
      es.close();
      await proxy.close();
    }
  }, 60_000);

  it('long-poll: resumed from an event in the middle of a page, it gives the rest exactly; `now` waits', async () => {
    await say('poll', ALICE, 30);
    const first = (await getJson(url('?stream=flue:cap0/poll@-1&live=long-poll'), ALICE)).body as LongPoll;
    const expected = await allUpdates('poll', ALICE);
    expect(first.events.length).toBeGreaterThan(4);
    expect(first.events.flatMap((e) => e.data as unknown[])).toEqual(expected);
    expect(first.cursors['flue:cap0/poll']).toMatch(/^\d{16}_\d{16}$/);
    const mid = 3;
    const resumed = (
      await getJson(url(`?stream=flue:cap0/poll@${first.events[mid - 1]!.cursor}&live=long-poll`), ALICE)
    ).body as LongPoll;
    expect(resumed.events).toEqual(first.events.slice(mid));
    expect(resumed.cursors).toEqual(first.cursors);
    // From the head: held until the conversation's next message projects.
    const held = getJson(url('?stream=flue:cap0/poll@now&live=long-poll'), ALICE);
    const cursorNow = first.cursors['flue:cap0/poll']!;
    await say('poll', ALICE, 2);
    const next = (await held).body as LongPoll;
    expect(next.events.length).toBeGreaterThan(0);
    expect(next.events[0]!.cursor > cursorNow).toBe(true);
    const after = await allUpdates('poll', ALICE);
    expect(after.slice(0, expected.length)).toEqual(expected);
  }, 30_000);

  it('an offset of another generation or beyond the head is a gap event, then the stream starts over', async () => {
    await say('gone', ALICE, 4);
    const expected = await allUpdates('gone', ALICE);
    const head = ((await getJson(url('?stream=flue:cap0/gone@-1&live=long-poll'), ALICE)).body as LongPoll)
      .cursors['flue:cap0/gone']!;
    const [epoch, offset] = head.split('_') as [string, string];
    const otherEpoch = `${String(Number(epoch) + 1).padStart(16, '0')}_${offset}`;
    const ahead = `${epoch}_${String(Number(offset) + 1000).padStart(16, '0')}`;
    for (const cursor of [otherEpoch, ahead]) {
      const gap = (await getJson(url(`?stream=flue:cap0/gone@${cursor}&live=long-poll`), ALICE))
        .body as LongPoll;
      expect(gap.events).toEqual([
        {
          stream: 'flue:cap0/gone',
          cursor: '-1',
          event: 'gap',
          data: {
            code: 'stream_offset_gone',
            message: 'offset is beyond the stream head or from a lost store generation',
          },
        },
      ]);
      expect(gap.cursors).toEqual({ 'flue:cap0/gone': '-1' });
      const again = (await getJson(url('?stream=flue:cap0/gone@-1&live=long-poll'), ALICE)).body as LongPoll;
      expect(again.events.flatMap((e) => e.data as unknown[])).toEqual(expected);
    }
  }, 30_000);

  it('refuses bad keys and cursors, and other owners’ conversations, with the exact error', async () => {
    await say('mine', ALICE, 1);
    const f = (q: string, token = ALICE) => getJson(url(`${q}&live=long-poll`), token);
    const none = (key: string) => followError(404, 'not_found', `no such stream: ${key}`);
    expect(await f('?stream=flue:cap0/never@-1')).toEqual(none('flue:cap0/never'));
    // Bob's view of Alice's conversation: exactly as one that does not exist.
    expect(await f('?stream=flue:cap0/mine@-1', BOB)).toEqual(none('flue:cap0/mine'));
    expect(await f('?stream=flue:nope/mine@-1')).toEqual(none('flue:nope/mine'));
    expect(await f('?stream=flue:cap0@-1')).toEqual(none('flue:cap0'));
    expect(await f('?stream=flue:cap0/@-1')).toEqual(none('flue:cap0/'));
    for (const bad of ['12', '0_0', 'abc', '0000000000000001_000000000000001'])
      expect(await f(`?stream=flue:cap0/mine@${bad}`)).toEqual(
        followError(400, 'bad_request', 'flue:cap0/mine: the cursor must be -1, now or a Flue offset'),
      );
    // One refused stream refuses the request whole.
    expect(await f('?stream=flue:cap0/mine@-1&stream=flue:cap0/never@-1')).toEqual(none('flue:cap0/never'));
    expect((await f('?stream=flue:cap0/mine@-1')).status).toBe(200);
  }, 30_000);
});

describe('flue:… whose records after the cursor were trimmed', () => {
  it('is a gap event that sends the stream back to -1, which reads again', async () => {
    const trimSim = await startSimulator();
    const trimGw = await startTestGateway({
      capsules: { cap: trimSim.url },
      config: { longPollMaxMs: 1_000, retention: { maxRecords: 40, maxAgeMs: 0 } },
    });
    try {
      const conv = `${trimGw.baseUrl}/flue/cap/trimmed`;
      const c = createFlueClient({ url: conv });
      await c.wait(await c.send({ message: { kind: 'user', body: 'first' } }));
      const offset = (await fetch(conv, { method: 'HEAD' })).headers.get('stream-next-offset')!;
      const held = Number(offset.split('_')[1]);
      // Reads meet the store's trim once the hub's in-memory channel of the capsule has dissolved.
      await vi.waitFor(() => expect(trimGw.gateway.hub.capsuleStats('cap').tailLoop).toBe(false), {
        timeout: 15_000,
        interval: 50,
      });
      while ((await trimGw.core.position('cap')).first <= held + 1) await trimSim.submit('more').done;
      const res = await getJson(
        `${trimGw.baseUrl}/v1/follow?stream=flue:cap/trimmed@${offset}&live=long-poll`,
      );
      expect(res.body).toEqual({
        events: [
          {
            stream: 'flue:cap/trimmed',
            cursor: '-1',
            event: 'gap',
            data: {
              code: 'stream_offset_gone',
              message: 'offset is beyond the stream head or from a lost store generation',
            },
          },
        ],
        cursors: { 'flue:cap/trimmed': '-1' },
      });
      const again = await getJson(`${trimGw.baseUrl}/v1/follow?stream=flue:cap/trimmed@-1&live=long-poll`);
      expect(again.status).toBe(200);
      expect((again.body as LongPoll).events.every((e) => e.event === 'data')).toBe(true);
    } finally {
      await trimGw.close();
      await trimSim.stop();
    }
  }, 30_000);
});
