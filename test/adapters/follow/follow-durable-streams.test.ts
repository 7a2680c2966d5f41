/**
 * `ds:{path}` on `GET /v1/follow`: general Durable Streams' messages (JSON as JSON, text as text,
 * bytes as base64), through an EventSource a proxy cuts every 300 ms; a long-poll resumed from the
 * cursor of an event in the middle of a page; a stream deleted and created again is a `gap`, then
 * the new stream from its start; access as the stream's own GET; the exact error for every bad key
 * or cursor; and no `ds:` streams when general streams are off.
 */
import { randomUUID } from 'node:crypto';
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCuttingProxy } from '../../client/cutting-proxy.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import {
  followError,
  getJson,
  quickRetryFetch,
  sha256,
  type FollowEventJson,
  type LongPoll,
} from './follow-support.js';

const WRITER = 'follow-ds-writer-key-0123456789';
const READER = 'follow-ds-reader-key-0123456789';
const SUBMITTER = 'follow-ds-submit-key-0123456789';
const OTHER = 'follow-ds-other-owner-key-0123456789';
let gw: TestGateway;

beforeAll(async () => {
  gw = await startTestGateway({
    capsules: {},
    config: { longPollMaxMs: 2_000 },
    extra: {
      durableStreams: { writable: true },
      auth: {
        apiKeys: [
          // Writer and reader share every path (a grant); another owner's streams are its own.
          { sha256: sha256(WRITER), owner: 'w', scopes: ['write'], streams: ['**'] },
          { sha256: sha256(READER), owner: 'r', scopes: ['observe'], streams: ['**'] },
          { sha256: sha256(SUBMITTER), owner: 's', scopes: ['submit'], streams: ['**'] },
          { sha256: sha256(OTHER), owner: 'o', scopes: ['write'] },
        ],
      },
    },
    tuning: { streams: { keyPrefix: `test:ds-follow:${randomUUID()}` } },
  });
});
afterAll(async () => gw.close());

const stream = (path: string) => `${gw.baseUrl}/v1/stream/${path}`;
const write = async (method: 'PUT' | 'POST' | 'DELETE', path: string, type: string, body?: string) => {
  const res = await fetch(stream(path), {
    method,
    headers: { authorization: `Bearer ${WRITER}`, 'content-type': type },
    ...(body === undefined ? {} : { body }),
  });
  expect(res.status).toBeLessThan(300);
};
const url = (q: string) => `${gw.baseUrl}/v1/follow${q}`;

describe('ds:{path} on GET /v1/follow', () => {
  it('JSON and text streams over one EventSource cut every 300 ms: every message once, in order', async () => {
    await write('PUT', 'room/a', 'application/json');
    await write('PUT', 'logs/b', 'text/plain');
    const proxy = await startCuttingProxy(gw.baseUrl, { lifetimeMs: 300 });
    const got: FollowEventJson[] = [];
    const es = new EventSource(`${proxy.url}/v1/follow?stream=ds:room/a@-1&stream=ds:logs/b@-1`, {
      fetch: quickRetryFetch(READER),
    });
    es.onmessage = (e) => got.push(JSON.parse(e.data) as FollowEventJson);
    let batches = 0;
    try {
      // At least 40 batches, and on until the proxy has cut the follower a few times (bounded).
      for (; batches < 1000 && (batches < 40 || proxy.kills < 3); batches++) {
        const i = batches;
        await write('POST', 'room/a', 'application/json', JSON.stringify([{ n: 2 * i }, { n: 2 * i + 1 }]));
        await write('POST', 'logs/b', 'text/plain', `line ${i}\n`);
        await new Promise((r) => setTimeout(r, 10));
      }
      const of = (key: string) => got.filter((e) => e.stream === key);
      await expect
        .poll(() => of('ds:room/a').length >= 2 * batches && of('ds:logs/b').length >= batches, {
          timeout: 30_000,
          interval: 50,
        })
        .toBe(true);
      expect(proxy.kills).toBeGreaterThan(1);
      expect(of('ds:room/a').map((e) => e.data)).toEqual(
        Array.from({ length: 2 * batches }, (_, n) => ({ n })),
      );
      expect(of('ds:logs/b').map((e) => e.data)).toEqual(
        Array.from({ length: batches }, (_, i) => `line ${i}\n`),
      );
      expect(got.every((e) => e.event === 'message')).toBe(true);
      // Each cursor is the stream's own offset after the message (what its GET answers as next).
      const res = await fetch(`${stream('logs/b')}?offset=-1`, {
        headers: { authorization: `Bearer ${READER}` },
      });
      expect(of('ds:logs/b').at(-1)!.cursor).toBe(res.headers.get('stream-next-offset'));
    } finally {
      es.close();
      await proxy.close();
    }
  }, 60_000);

  it('long-poll: resumed mid-page it gives the rest exactly; `now` waits; bytes come as base64', async () => {
    await write('PUT', 'bin/c', 'application/octet-stream');
    for (let i = 0; i < 6; i++) await write('POST', 'bin/c', 'application/octet-stream', `m${i}`);
    const first = (await getJson(url('?stream=ds:bin/c@-1&live=long-poll'), READER)).body as LongPoll;
    expect(first.events.map((e) => e.data)).toEqual(
      Array.from({ length: 6 }, (_, i) => Buffer.from(`m${i}`).toString('base64')),
    );
    const resumed = (await getJson(url(`?stream=ds:bin/c@${first.events[2]!.cursor}&live=long-poll`), READER))
      .body as LongPoll;
    expect(resumed).toEqual({ events: first.events.slice(3), cursors: first.cursors });
    const held = getJson(url('?stream=ds:bin/c@now&live=long-poll'), READER);
    await new Promise((r) => setTimeout(r, 50));
    await write('POST', 'bin/c', 'application/octet-stream', 'late');
    const next = (await held).body as LongPoll;
    expect(next.events.map((e) => e.data)).toEqual([Buffer.from('late').toString('base64')]);
  }, 30_000);

  it('a stream deleted and created again: its old cursor is a gap, then the new stream from its start', async () => {
    await write('PUT', 'again/d', 'application/json');
    await write('POST', 'again/d', 'application/json', '[1,2]');
    const old = ((await getJson(url('?stream=ds:again/d@-1&live=long-poll'), READER)).body as LongPoll)
      .cursors['ds:again/d']!;
    await write('DELETE', 'again/d', 'application/json');
    await write('PUT', 'again/d', 'application/json');
    await write('POST', 'again/d', 'application/json', '[3,4,5]');
    const gap = (await getJson(url(`?stream=ds:again/d@${old}&live=long-poll`), READER)).body as LongPoll;
    expect(gap).toEqual({
      events: [
        {
          stream: 'ds:again/d',
          cursor: '-1',
          event: 'gap',
          data: { code: 'offset_gone', message: 'offset from an earlier epoch of this stream' },
        },
      ],
      cursors: { 'ds:again/d': '-1' },
    });
    const fresh = (await getJson(url('?stream=ds:again/d@-1&live=long-poll'), READER)).body as LongPoll;
    expect(fresh.events.map((e) => e.data)).toEqual([3, 4, 5]);
  }, 30_000);

  it('access as the stream’s GET, and the exact error for every bad key or cursor', async () => {
    await write('PUT', 'acl/e', 'application/json', '[0]');
    const f = (q: string, token = READER) => getJson(url(`${q}&live=long-poll`), token);
    const none = (key: string) => followError(404, 'not_found', `no such stream: ${key}`);
    // A key without `write` or `observe` reads no general stream: as if it did not exist.
    expect(await f('?stream=ds:acl/e@-1', SUBMITTER)).toEqual(none('ds:acl/e'));
    // Another owner without a grant names a stream of its own by that path: none, as on its GET.
    expect(await f('?stream=ds:acl/e@-1', OTHER)).toEqual(none('ds:acl/e'));
    expect(
      (await fetch(`${gw.baseUrl}/v1/stream/acl/e`, { headers: { authorization: `Bearer ${OTHER}` } }))
        .status,
    ).toBe(404);
    for (const key of ['ds:acl/none', 'ds:__ds/subscriptions', 'ds:acl//e', 'ds:acl/../e', 'ds:murmur/x'])
      expect(await f(`?stream=${key}@-1`)).toEqual(none(key));
    for (const bad of ['5', 'abc', '0_0'])
      expect(await f(`?stream=ds:acl/e@${bad}`)).toEqual(
        followError(400, 'bad_request', 'ds:acl/e: the cursor must be -1, now or a stream offset'),
      );
    const tail = ((await f('?stream=ds:acl/e@-1')).body as LongPoll).cursors['ds:acl/e']!;
    const [epoch] = tail.split('_') as [string];
    expect(await f(`?stream=ds:acl/e@${epoch}_0000000000000002`)).toEqual(
      followError(400, 'bad_request', 'ds:acl/e: offset beyond the tail of the stream'),
    );
    expect((await f('?stream=ds:acl/e@-1', WRITER)).status).toBe(200);
  }, 30_000);

  it('no ds: streams when general streams are off', async () => {
    const off = await startTestGateway({ capsules: {} });
    try {
      expect(await getJson(`${off.baseUrl}/v1/follow?stream=ds:any/x@-1&live=long-poll`)).toEqual(
        followError(404, 'not_found', 'no such stream: ds:any/x'),
      );
    } finally {
      await off.close();
    }
  });
});
