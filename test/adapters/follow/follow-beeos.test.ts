/**
 * `beeos:{agent}/tasks/{id}` and `beeos:{agent}/conversations/{id}` on `GET /v1/follow`: the same
 * envelopes `…/events` streams, with the task's `end`, through an EventSource a proxy cuts every
 * 300 ms; a long-poll resumed from the cursor of an event in the middle of a page gives the rest
 * exactly; another owner's task is the 404 of an unknown one; bad keys and cursors get the exact
 * error.
 */
import { EventSource } from 'eventsource';
import { describe, expect, it } from 'vitest';
import { startCuttingProxy } from '../../client/cutting-proxy.js';
import { collectSse, type SseEvent } from '../beeos/support/sse-client.js';
import {
  followError,
  getJson,
  quickRetryFetch,
  twoOwnersForFile,
  type FollowEventJson,
  type LongPoll,
} from './follow-support.js';

const ALICE = 'follow-beeos-alice-key-0123456789';
const BOB = 'follow-beeos-bob-key-0123456789';
const gw = twoOwnersForFile(ALICE, BOB);

const agent = () => `${gw().baseUrl}/api/v1/agents/cap0`;
const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const post = async (url: string, body: unknown, token = ALICE) => {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth(token) },
    body: JSON.stringify(body),
  });
  expect(res.status).toBeLessThan(300);
  return ((await res.json()) as { data: Record<string, string> }).data;
};
const script = (chunks: number) => `#sim ${JSON.stringify({ chunks, thinking: 1, delayMs: 5 })}`;
const completedReplies = (events: SseEvent[]) =>
  events.filter((e) => e.event === 'message' && /"agent_reply"/.test(e.data) && /"completed"/.test(e.data))
    .length;

/** The channel's `…/events` from the start until `until`: what a follower must get, in order. */
const eventsOf = async (path: string, until: (seen: SseEvent[]) => boolean) => {
  const seen: SseEvent[] = [];
  const r = await collectSse(`${agent()}/${path}/events?since=0`, auth(ALICE), (ev) => {
    seen.push(ev);
    return until(seen);
  });
  return r.events;
};
const messagesOf = (events: SseEvent[]) =>
  events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as unknown);

const url = (q: string) => `${gw().baseUrl}/v1/follow${q}`;

describe('beeos:… on GET /v1/follow', () => {
  it('a task and a conversation over one EventSource cut every 300 ms: every envelope once, in order', async () => {
    const conv = (await post(`${agent()}/conversations`, {})).conversation_id!;
    await post(`${agent()}/conversations/${conv}/messages`, { message: script(5) });
    const task = (await post(`${agent()}/tasks`, { message: script(40) })).task_id!;
    const proxy = await startCuttingProxy(gw().baseUrl, { lifetimeMs: 300 });
    const got: FollowEventJson[] = [];
    const es = new EventSource(
      `${proxy.url}/v1/follow?stream=beeos:cap0/tasks/${task}@-1&stream=beeos:cap0/conversations/${conv}@0`,
      { fetch: quickRetryFetch(ALICE) },
    );
    es.onmessage = (e) => got.push(JSON.parse(e.data) as FollowEventJson);
    try {
      await post(`${agent()}/conversations/${conv}/messages`, { message: script(40) });
      const taskEvents = await eventsOf(`tasks/${task}`, (seen) => seen.at(-1)?.event === 'end');
      const convEvents = await eventsOf(`conversations/${conv}`, (seen) => completedReplies(seen) >= 2);
      const ofTask = () => got.filter((e) => e.stream === `beeos:cap0/tasks/${task}`);
      const ofConv = () => got.filter((e) => e.stream === `beeos:cap0/conversations/${conv}`);
      await expect
        .poll(
          () => ofTask().some((e) => e.event === 'end') && ofConv().length >= messagesOf(convEvents).length,
          {
            timeout: 30_000,
            interval: 50,
          },
        )
        .toBe(true);
      expect(proxy.kills).toBeGreaterThan(1);
      const taskGot = ofTask();
      expect(taskGot.filter((e) => e.event === 'message').map((e) => e.data)).toEqual(messagesOf(taskEvents));
      expect(taskGot.at(-1)).toMatchObject({ event: 'end', data: { reason: 'task_terminal' } });
      expect(taskGot.filter((e) => e.event === 'end')).toHaveLength(1);
      expect(ofConv().map((e) => e.data)).toEqual(messagesOf(convEvents));
      // A message's cursor is its envelope offset.
      for (const e of got.filter((x) => x.event === 'message'))
        expect(e.cursor).toBe(String((e.data as { offset: number }).offset));
    } finally {
      es.close();
      await proxy.close();
    }
  }, 60_000);

  it('long-poll: resumed from an event in the middle of a page, it gives the rest exactly; `now` waits', async () => {
    const task = (await post(`${agent()}/tasks`, { message: script(20) })).task_id!;
    const key = `beeos:cap0/tasks/${task}`;
    const expected = messagesOf(await eventsOf(`tasks/${task}`, (seen) => seen.at(-1)?.event === 'end'));
    const first = (await getJson(url(`?stream=${key}@-1&live=long-poll`), ALICE)).body as LongPoll;
    expect(first.events.filter((e) => e.event === 'message').map((e) => e.data)).toEqual(expected);
    expect(first.events.at(-1)!.event).toBe('end');
    const mid = 3;
    const resumed = (
      await getJson(url(`?stream=${key}@${first.events[mid - 1]!.cursor}&live=long-poll`), ALICE)
    ).body as LongPoll;
    expect(resumed.events).toEqual(first.events.slice(mid));
    expect(resumed.cursors).toEqual(first.cursors);
    // A conversation followed from its head: held until its next message.
    const conv = (await post(`${agent()}/conversations`, {})).conversation_id!;
    const ckey = `beeos:cap0/conversations/${conv}`;
    const held = getJson(url(`?stream=${ckey}@now&live=long-poll`), ALICE);
    await post(`${agent()}/conversations/${conv}/messages`, { message: 'hello' });
    const next = (await held).body as LongPoll;
    expect(next.events.length).toBeGreaterThan(0);
    expect(next.events.every((e) => e.stream === ckey && e.event === 'message')).toBe(true);
  }, 30_000);

  it('refuses bad keys and cursors, and other owners’ channels, with the exact error', async () => {
    const task = (await post(`${agent()}/tasks`, { message: 'hi' })).task_id!;
    const conv = (await post(`${agent()}/conversations`, {})).conversation_id!;
    const f = (q: string, token = ALICE) => getJson(url(`${q}&live=long-poll`), token);
    const none = (key: string) => followError(404, 'not_found', `no such stream: ${key}`);
    // Bob's view of Alice's task and conversation: exactly as ones that do not exist.
    expect(await f(`?stream=beeos:cap0/tasks/${task}@-1`, BOB)).toEqual(none(`beeos:cap0/tasks/${task}`));
    expect(await f(`?stream=beeos:cap0/conversations/${conv}@-1`, BOB)).toEqual(
      none(`beeos:cap0/conversations/${conv}`),
    );
    for (const key of [
      'beeos:cap0/tasks/task_nope',
      `beeos:cap0/conversations/${task}`,
      `beeos:cap0/tasks/${conv}`,
      `beeos:nope/tasks/${task}`,
      `beeos:cap0/tasks`,
      `beeos:cap0/jobs/${task}`,
      `beeos:cap0/tasks/${task}/events`,
    ])
      expect(await f(`?stream=${key}@-1`)).toEqual(none(key));
    for (const bad of ['x', '1.5', '-2', '12345678901234567'])
      expect(await f(`?stream=beeos:cap0/tasks/${task}@${bad}`)).toEqual(
        followError(
          400,
          'bad_request',
          `beeos:cap0/tasks/${task}: the cursor must be -1, now or a since offset`,
        ),
      );
    expect((await f(`?stream=beeos:cap0/tasks/${task}@-1`)).status).toBe(200);
  }, 30_000);
});
