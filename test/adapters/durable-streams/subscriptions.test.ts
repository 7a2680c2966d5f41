/**
 * Durable Streams subscriptions (PROTOCOL.md §6–7) through the whole gateway with real webhook
 * receivers on 127.0.0.1: every bad input's exact answer (and that nothing changed), receiver URL
 * rules (SSRF), owners, per-owner bounds, retries with `next_attempt_at`, fencing. The protocol's
 * own cases run in conformance.test.ts; restarts and replicas on Redis in subscriptions-redis.test.ts.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import {
  signatureVerifies,
  startWebhookReceiver,
  type WebhookReceiver,
} from '../../support/webhook-receiver.js';

let gw: TestGateway | null = null;
let receiver: WebhookReceiver | null = null;
afterEach(async () => {
  await gw?.close();
  await receiver?.close();
  gw = null;
  receiver = null;
});

const start = (
  durableStreams: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): Promise<TestGateway> =>
  startTestGateway({
    capsules: {},
    extra: {
      durableStreams: { writable: true, subscriptions: { sweepMs: 100 }, ...durableStreams },
      webhooks: { allowLoopback: true },
      ...extra,
    },
  });

/** A subscription as GET answers it (or an error body). */
interface View {
  streams: { path: string; link_type: string; acked_offset: string }[];
  next_attempt_at?: string;
  [field: string]: unknown;
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const sub = (id: string): string => `${gw!.baseUrl}/v1/stream/__ds/subscriptions/${id}`;
const put = (id: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(sub(id), {
    method: 'PUT',
    headers: { ...JSON_HEADERS, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
const post = (url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(body) });
const get = async (
  id: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: View }> => {
  const res = await fetch(sub(id), { headers });
  return { status: res.status, body: (await res.json()) as View };
};
const stream = (
  path: string,
  method: 'PUT' | 'POST',
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> =>
  fetch(`${gw!.baseUrl}/v1/stream/${path}`, {
    method,
    headers: { ...JSON_HEADERS, ...headers },
    body: JSON.stringify(body),
  });

/** Re-reads until `check` holds (bounded): a state another task writes after an event we saw. */
const eventually = async <T>(read: () => Promise<T>, check: (v: T) => boolean): Promise<T> => {
  for (let i = 0; i < 300; i++) {
    const v = await read();
    if (check(v)) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('condition never held');
};

const problem = (code: string, message: string) => ({ error: { code, message } });

describe('subscription control API: bad input', () => {
  it('answers every malformed create with the exact 400 and stores nothing', async () => {
    gw = await start();
    const cases: [unknown, string][] = [
      ['not json', 'the body is not JSON'],
      [{ type: 'email', pattern: 'a/*' }, 'type: Invalid option: expected one of "webhook"|"pull-wake"'],
      [{ type: 'pull-wake', wake_stream: 'w' }, 'pattern: a pattern or at least one stream is required'],
      [{ type: 'webhook', pattern: 'a/*' }, 'webhook: a webhook subscription needs webhook.url'],
      [{ type: 'pull-wake', pattern: 'a/*' }, 'wake_stream: a pull-wake subscription needs wake_stream'],
      [
        { type: 'pull-wake', pattern: 'a/*', wake_stream: 'w', webhook: { url: 'http://127.0.0.1/' } },
        'webhook: only a webhook subscription has a webhook',
      ],
      [{ type: 'pull-wake', pattern: 'a//b', wake_stream: 'w' }, 'pattern: is not a stream path pattern'],
      [{ type: 'pull-wake', pattern: 'a/x**', wake_stream: 'w' }, 'pattern: is not a stream path pattern'],
      [{ type: 'pull-wake', streams: ['../x'], wake_stream: 'w' }, 'streams.0: is not a stream path'],
      [
        { type: 'pull-wake', pattern: 'a/*', wake_stream: 'w', lease_ttl_ms: 999 },
        'lease_ttl_ms: Too small: expected number to be >=1000',
      ],
      [
        { type: 'pull-wake', pattern: 'a/*', wake_stream: 'w', lease_ttl_ms: 600_001 },
        'lease_ttl_ms: Too big: expected number to be <=600000',
      ],
    ];
    for (const [body, message] of cases) {
      const res = await put('bad', body);
      expect([res.status, await res.json()]).toEqual([400, problem('INVALID_REQUEST', message)]);
    }
    expect(await get('bad')).toEqual({
      status: 404,
      body: problem('SUBSCRIPTION_NOT_FOUND', 'no such subscription'),
    });
    const badId = await fetch(sub('a%20b'));
    expect([badId.status, await badId.json()]).toEqual([
      404,
      problem('SUBSCRIPTION_NOT_FOUND', 'no such subscription'),
    ]);
  });

  it('answers bad stream lists, paths, methods and oversized bodies exactly, changing nothing', async () => {
    gw = await start();
    expect((await put('links', { type: 'pull-wake', streams: ['x/a'], wake_stream: 'w' })).status).toBe(201);
    const answer = async (res: Promise<Response>): Promise<[number, unknown]> => {
      const r = await res;
      return [r.status, await r.json()];
    };
    expect(await answer(post(`${sub('links')}/streams`, { streams: [] }))).toEqual([
      400,
      problem('INVALID_REQUEST', 'streams: Too small: expected array to have >=1 items'),
    ]);
    expect(await answer(post(`${sub('links')}/streams`, { streams: ['a//b'] }))).toEqual([
      400,
      problem('INVALID_REQUEST', 'streams.0: is not a stream path'),
    ]);
    expect(await answer(post(`${sub('missing')}/streams`, { streams: ['x/b'] }))).toEqual([
      404,
      problem('SUBSCRIPTION_NOT_FOUND', 'no such subscription'),
    ]);
    expect(
      await answer(fetch(`${sub('links')}/streams/${encodeURIComponent('a//b')}`, { method: 'DELETE' })),
    ).toEqual([400, problem('INVALID_REQUEST', 'not a stream path')]);
    expect(await answer(put('links', 'x'.repeat(300 * 1024)))).toEqual([
      413,
      problem('PAYLOAD_TOO_LARGE', 'request body exceeds 262144 bytes'),
    ]);
    const patch = await fetch(sub('links'), { method: 'PATCH' });
    expect([patch.status, patch.headers.get('allow'), await patch.json()]).toEqual([
      405,
      'GET, PUT, DELETE',
      problem('METHOD_NOT_ALLOWED', 'PATCH is not part of the protocol'),
    ]);
    const jwksPost = await fetch(`${gw.baseUrl}/v1/stream/__ds/jwks.json`, { method: 'POST' });
    expect(jwksPost.status).toBe(405);
    expect((await get('links')).body.streams).toEqual([
      { path: 'x/a', link_type: 'explicit', acked_offset: '-1' },
    ]);
  });

  it('refuses receivers on private, link-local and (without allowLoopback) loopback addresses', async () => {
    gw = await start({}, { webhooks: { allowLoopback: false, allowHosts: ['10.1.2.3'] } });
    const cases: [string, string][] = [
      ['http://10.0.0.1/hook', 'webhook.url is a private, link-local or internal address'],
      ['http://192.168.1.1/hook', 'webhook.url is a private, link-local or internal address'],
      ['http://172.16.0.1/hook', 'webhook.url is a private, link-local or internal address'],
      ['http://169.254.169.254/latest', 'webhook.url is a private, link-local or internal address'],
      ['http://[fd00::1]/hook', 'webhook.url is a private, link-local or internal address'],
      ['http://[::ffff:10.0.0.1]/hook', 'webhook.url is a private, link-local or internal address'],
      ['http://127.0.0.1:9/hook', 'webhook.url is a loopback address (webhooks.allowLoopback is off)'],
      ['http://localhost/hook', 'webhook.url is a loopback address (webhooks.allowLoopback is off)'],
      ['http://[::1]/hook', 'webhook.url is a loopback address (webhooks.allowLoopback is off)'],
      ['ftp://example.com/hook', 'webhook.url must be http or https'],
      ['http://user:pw@example.com/hook', 'webhook.url must not carry credentials'],
      ['no url', 'webhook.url is not a URL'],
    ];
    for (const [url, message] of cases) {
      const res = await put('ssrf', { type: 'webhook', pattern: 'a/*', webhook: { url } });
      expect([url, res.status, await res.json()]).toEqual([
        url,
        400,
        problem('WEBHOOK_URL_REJECTED', message),
      ]);
    }
    expect((await get('ssrf')).status).toBe(404);
    // A host the operator admits is accepted whatever class its address is.
    expect(
      (await put('ssrf', { type: 'webhook', pattern: 'a/*', webhook: { url: 'http://10.1.2.3/hook' } }))
        .status,
    ).toBe(201);
  });

  it('re-confirms an identical create with 200 and refuses another configuration with 409', async () => {
    gw = await start();
    const body = { type: 'pull-wake', pattern: 'orders/*', wake_stream: 'wake/pool' };
    expect((await put('s1', body)).status).toBe(201);
    expect((await put('s1', body)).status).toBe(200);
    const other = await put('s1', { ...body, pattern: 'orders/**' });
    expect([other.status, await other.json()]).toEqual([
      409,
      problem('SUBSCRIPTION_ALREADY_EXISTS', 'the subscription exists with another configuration'),
    ]);
    expect((await get('s1')).body).toMatchObject({ id: 's1', pattern: 'orders/*', lease_ttl_ms: 30_000 });
    expect((await fetch(sub('s1'), { method: 'DELETE' })).status).toBe(204);
    const again = await fetch(sub('s1'), { method: 'DELETE' });
    expect([again.status, await again.json()]).toEqual([
      404,
      problem('SUBSCRIPTION_NOT_FOUND', 'no such subscription'),
    ]);
  });

  it('fences callbacks: a missing, forged or stale token, a wrong generation, an unknown stream or offset', async () => {
    gw = await start();
    expect((await stream('wake/w1', 'PUT', [])).status).toBe(201);
    expect(
      (
        await put('p1', {
          type: 'pull-wake',
          pattern: 'jobs/*',
          wake_stream: 'wake/w1',
          lease_ttl_ms: 60_000,
        })
      ).status,
    ).toBe(201);
    const idle = await post(`${sub('p1')}/claim`, { worker: 'w' });
    expect([idle.status, await idle.json()]).toEqual([409, problem('NO_PENDING_WORK', 'nothing to claim')]);
    const badClaim = await post(`${sub('p1')}/claim`, { worker: '' });
    expect([badClaim.status, await badClaim.json()]).toEqual([
      400,
      problem('INVALID_REQUEST', 'worker: Too small: expected string to have >=1 characters'),
    ]);
    const created = await stream('jobs/1', 'PUT', { n: 1 });
    expect(created.status).toBe(201);
    const tail = created.headers.get('stream-next-offset')!;
    const claim = await eventually(
      () => post(`${sub('p1')}/claim`, { worker: 'w' }),
      (r) => r.status === 200,
    );
    const claimed = (await claim.json()) as { wake_id: string; generation: number; token: string };
    const ack = (body: unknown, token: string | null = claimed.token) =>
      post(`${sub('p1')}/ack`, body, token === null ? {} : { authorization: `Bearer ${token}` });
    const good = {
      wake_id: claimed.wake_id,
      generation: claimed.generation,
      acks: [{ stream: 'jobs/1', offset: tail }],
    };
    const expectAnswer = async (res: Promise<Response>, status: number, body: unknown) => {
      const r = await res;
      expect([r.status, await r.json()]).toEqual([status, body]);
    };
    await expectAnswer(
      ack(good, null),
      401,
      problem('TOKEN_INVALID', 'a callback token is required (Authorization: Bearer)'),
    );
    await expectAnswer(
      ack(good, 'forged.token.here'),
      401,
      problem('TOKEN_INVALID', 'invalid callback token'),
    );
    await expectAnswer(
      ack({ ...good, generation: claimed.generation + 1 }),
      409,
      problem('FENCED', 'this wake is no longer current'),
    );
    await expectAnswer(
      ack({ ...good, wake_id: 'w_other' }),
      409,
      problem('FENCED', 'this wake is no longer current'),
    );
    await expectAnswer(
      ack({ ...good, acks: [{ stream: 'jobs/2', offset: tail }] }),
      409,
      problem('INVALID_OFFSET', 'the subscription does not follow jobs/2'),
    );
    await expectAnswer(
      ack({ ...good, acks: [{ stream: 'jobs/1', offset: '-1' }] }),
      409,
      problem('INVALID_OFFSET', '-1 is no offset of jobs/1'),
    );
    await expectAnswer(
      ack({ ...good, generation: 0 }),
      400,
      problem('INVALID_REQUEST', 'generation: Too small: expected number to be >=1'),
    );
    // Nothing of the refused acks was kept: the offset is still where the link began.
    const before = await get('p1');
    expect(before.body.streams).toEqual([
      { path: 'jobs/1', link_type: 'pattern', acked_offset: `${tail.slice(0, 16)}_${'0'.repeat(16)}` },
    ]);
    // A partial ack keeps the wake (and extends its lease); done ends it; a second done is fenced.
    await expectAnswer(ack(good), 200, { ok: true, next_wake: false });
    await expectAnswer(ack({ ...good, done: true }), 200, { ok: true, next_wake: false });
    await expectAnswer(
      ack({ ...good, done: true }),
      409,
      problem('FENCED', 'this wake is no longer current'),
    );
    expect((await get('p1')).body.streams[0]?.acked_offset).toBe(tail);
  });
});

describe('subscriptions and owners', () => {
  const key = (secret: string) => ({
    sha256: createHash('sha256').update(secret).digest('hex'),
    owner: secret,
    scopes: ['write'],
  });
  const as = (secret: string) => ({ authorization: `Bearer ${secret}` });

  it("keeps each owner's subscriptions apart, bounds them per owner, and needs credentials", async () => {
    gw = await start(
      { subscriptions: { maxPerOwner: 1, sweepMs: 100 } },
      { auth: { apiKeys: [key('alice-key'), key('bob-key')] } },
    );
    const body = { type: 'pull-wake', pattern: 'a/*', wake_stream: 'wake' };
    const anonymous = await put('mine', body);
    expect(anonymous.status).toBe(401);
    expect((await put('mine', body, as('alice-key'))).status).toBe(201);
    // Bob names the same id: his own namespace, so it is missing for him, and his to create.
    expect(await get('mine', as('bob-key'))).toEqual({
      status: 404,
      body: problem('SUBSCRIPTION_NOT_FOUND', 'no such subscription'),
    });
    const bobDelete = await fetch(sub('mine'), { method: 'DELETE', headers: as('bob-key') });
    expect(bobDelete.status).toBe(404);
    expect((await get('mine', as('alice-key'))).status).toBe(200);
    const full = await put('second', body, as('alice-key'));
    expect([full.status, await full.json()]).toEqual([
      507,
      problem('TOO_MANY_SUBSCRIPTIONS', 'this owner holds 1 subscriptions already'),
    ]);
    expect((await get('second', as('alice-key'))).status).toBe(404);
    expect((await put('mine', body, as('bob-key'))).status).toBe(201);
  });

  it("wakes an owner's subscription only for appends to that owner's streams, through a real callback", async () => {
    gw = await start({}, { auth: { apiKeys: [key('alice-key'), key('bob-key')] } });
    receiver = await startWebhookReceiver();
    expect(
      (
        await put(
          'hook',
          { type: 'webhook', pattern: 'feed/*', webhook: { url: receiver.url } },
          as('alice-key'),
        )
      ).status,
    ).toBe(201);
    // Bob's feed/x is his own stream: Alice's subscription never hears of it.
    expect((await stream('feed/x', 'PUT', { by: 'bob' }, as('bob-key'))).status).toBe(201);
    expect((await stream('feed/x', 'PUT', { by: 'alice' }, as('alice-key'))).status).toBe(201);
    const first = await receiver.delivery(1);
    expect(first.body.streams).toEqual([
      expect.objectContaining({ path: 'feed/x', link_type: 'pattern', has_pending: true }),
    ]);
    const jwks = (await (await fetch(`${gw.baseUrl}/v1/stream/__ds/jwks.json`)).json()) as {
      keys: Record<string, string>[];
    };
    expect(signatureVerifies(first, jwks)).toBe(true);
    // The callback carries no gateway credential: the token is its authority.
    const done = await post(
      first.body.callback_url,
      {
        wake_id: first.body.wake_id,
        generation: first.body.generation,
        acks: [{ stream: 'feed/x', offset: first.body.streams[0]!.tail_offset }],
        done: true,
      },
      { authorization: `Bearer ${first.body.callback_token}` },
    );
    expect([done.status, await done.json()]).toEqual([200, { ok: true, next_wake: false }]);
    // Bob holds no such subscription: the token names Alice's, Bob's id of the same name is no match.
    expect(
      (await put('hook', { type: 'pull-wake', pattern: 'feed/*', wake_stream: 'w' }, as('bob-key'))).status,
    ).toBe(201);
    expect(receiver.deliveries).toHaveLength(1);
  });
});

describe('what counts as an append', () => {
  it("a fork's inherited messages wake nobody; its own body does, from after the inherited ones", async () => {
    gw = await start();
    expect((await stream('wake/f', 'PUT', [])).status).toBe(201);
    expect((await stream('src/a', 'PUT', [{ n: 1 }, { n: 2 }])).status).toBe(201);
    expect((await put('forks', { type: 'pull-wake', pattern: 'f/*', wake_stream: 'wake/f' })).status).toBe(
      201,
    );
    const fork = await fetch(`${gw.baseUrl}/v1/stream/f/quiet`, {
      method: 'PUT',
      headers: { ...JSON_HEADERS, 'stream-forked-from': '/v1/stream/src/a' },
    });
    expect(fork.status).toBe(201);
    const withBody = await fetch(`${gw.baseUrl}/v1/stream/f/loud`, {
      method: 'PUT',
      headers: { ...JSON_HEADERS, 'stream-forked-from': '/v1/stream/src/a' },
      body: JSON.stringify({ n: 3 }),
    });
    expect(withBody.status).toBe(201);
    const tail = withBody.headers.get('stream-next-offset')!;
    const view = await eventually(
      () => get('forks'),
      (r) => r.body.streams.length > 0,
    );
    // Only the fork with a body is linked, just before its own message (position 2 of 3).
    expect(view.body.streams).toEqual([
      { path: 'f/loud', link_type: 'pattern', acked_offset: `${tail.slice(0, 16)}_${'2'.padStart(16, '0')}` },
    ]);
  });
});

describe('wakes in flight per owner', () => {
  it('refuses a claim past maxWakesPerOwner with 429 until a wake ends', async () => {
    gw = await start({ subscriptions: { maxWakesPerOwner: 1, sweepMs: 100 } });
    expect((await stream('wake/q', 'PUT', [])).status).toBe(201);
    for (const id of ['q1', 'q2'])
      expect((await put(id, { type: 'pull-wake', streams: [`q/${id}`], wake_stream: 'wake/q' })).status).toBe(
        201,
      );
    const tails: Record<string, string> = {};
    for (const id of ['q1', 'q2']) {
      expect((await stream(`q/${id}`, 'PUT', [])).status).toBe(201);
      const res = await stream(`q/${id}`, 'POST', { id });
      tails[id] = res.headers.get('stream-next-offset')!;
    }
    const first = await eventually(
      () => post(`${sub('q1')}/claim`, { worker: 'w1' }),
      (r) => r.status === 200,
    );
    const claimed = (await first.json()) as { wake_id: string; generation: number; token: string };
    const busy = await post(`${sub('q2')}/claim`, { worker: 'w2' });
    expect([busy.status, await busy.json()]).toEqual([
      429,
      problem('TOO_MANY_WAKES', 'this owner has 1 wakes in flight'),
    ]);
    const done = await post(
      `${sub('q1')}/ack`,
      {
        wake_id: claimed.wake_id,
        generation: claimed.generation,
        acks: [{ stream: 'q/q1', offset: tails.q1 }],
        done: true,
      },
      { authorization: `Bearer ${claimed.token}` },
    );
    expect(done.status).toBe(200);
    // The next sweep counts no wake of this owner: the second claim goes through.
    await eventually(
      () => post(`${sub('q2')}/claim`, { worker: 'w2' }),
      (r) => r.status === 200,
    );
  });
});

describe('webhook delivery', () => {
  it('retries a failed delivery with a persisted next_attempt_at and a new generation', async () => {
    gw = await start();
    receiver = await startWebhookReceiver([
      { status: 500, body: { error: 'down' } },
      { status: 200, body: { done: true } },
    ]);
    expect(
      (await put('retry', { type: 'webhook', streams: ['r/1'], webhook: { url: receiver.url } })).status,
    ).toBe(201);
    const created = await stream('r/1', 'PUT', { n: 1 });
    // Explicit links start at the tail when the subscription was made: the stream did not exist.
    const tail = created.headers.get('stream-next-offset')!;
    const failed = await receiver.delivery(1);
    const failedAt = Date.now();
    const waiting = await eventually(
      () => get('retry'),
      (r) => r.body.next_attempt_at !== undefined,
    );
    // 1 s − 20 % at least after the failure was answered (retry.test.ts checks the whole range).
    expect(Date.parse(waiting.body.next_attempt_at as string)).toBeGreaterThanOrEqual(failedAt + 800 - 50);
    const retried = await receiver.delivery(2);
    expect(retried.body.generation).toBe(failed.body.generation + 1);
    expect(retried.body.wake_id).not.toBe(failed.body.wake_id);
    const done = await eventually(
      () => get('retry'),
      (r) => r.body.streams[0]?.acked_offset === tail,
    );
    expect(done.body.next_attempt_at).toBeUndefined();
  });

  it('links a stream matched by the pattern before the append that found it, and delivers again for newer data', async () => {
    gw = await start();
    receiver = await startWebhookReceiver([{ status: 200, body: { done: true } }]);
    expect(
      (await put('glob', { type: 'webhook', pattern: 'deep/**', webhook: { url: receiver.url } })).status,
    ).toBe(201);
    expect((await stream('other/x', 'PUT', { n: 0 })).status).toBe(201);
    expect((await stream(`deep/a/b`, 'PUT', { n: 1 })).status).toBe(201);
    const first = await receiver.delivery(1);
    expect(first.body.streams.map((s) => [s.path, s.acked_offset.slice(17), s.has_pending])).toEqual([
      ['deep/a/b', '0000000000000000', true],
    ]);
    await eventually(
      () => get('glob'),
      (r) => r.body.streams[0]?.acked_offset === first.body.streams[0]!.tail_offset,
    );
    const append = await stream('deep/a/b', 'POST', { n: 2 });
    expect(append.status).toBe(204);
    const second = await receiver.delivery(2);
    expect(second.body.streams[0]!.acked_offset).toBe(first.body.streams[0]!.tail_offset);
    expect(second.body.streams[0]!.tail_offset).toBe(append.headers.get('stream-next-offset'));
  });
});

it('answers __ds paths that are not subscriptions 501, and the JWKS with its media type', async () => {
  gw = await start();
  const other = await fetch(`${gw.baseUrl}/v1/stream/__ds/other`);
  expect(other.status).toBe(501);
  const jwks = await fetch(`${gw.baseUrl}/v1/stream/__ds/jwks.json`);
  expect(jwks.headers.get('content-type')).toBe('application/jwk-set+json');
  const body = (await jwks.json()) as { keys: Record<string, string>[] };
  expect(body.keys).toEqual([
    expect.objectContaining({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', kid: expect.stringMatching(/^ds_/) }),
  ]);
  expect(body.keys[0]).not.toHaveProperty('d');
});
