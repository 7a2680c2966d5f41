/**
 * The gateway's own rules around the general Durable Streams, on both stores: the configured
 * bounds (exact status and body, nothing of a refused request kept), the `write` scope, and the
 * surface switched off. The protocol itself is conformance.test.ts.
 */
import { createHash, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { noRedis, STORE_CASES, urlFor } from '../../support/redis.js';

let gw: TestGateway | null = null;
afterEach(async () => {
  await gw?.close();
  gw = null;
});

const BOUNDS = { maxStreams: 2, maxMessageBytes: 64, maxBodyBytes: 256 };

const start = async (
  redisUrl: string | undefined,
  extra: Record<string, unknown> = {},
): Promise<TestGateway> =>
  startTestGateway({
    capsules: {},
    ...(redisUrl ? { redisUrl } : {}),
    extra: { durableStreams: { writable: true, ...BOUNDS }, ...extra },
    // Its own key prefix: the stream count of this gateway only.
    tuning: { streams: { keyPrefix: `test:ds:${randomUUID()}` } },
  });

const error = async (res: Response): Promise<unknown> => res.json();
const read = async (base: string, path: string): Promise<{ body: string; next: string | null }> => {
  const res = await fetch(`${base}/v1/stream/${path}?offset=-1`);
  expect(res.status).toBe(200);
  return { body: await res.text(), next: res.headers.get('stream-next-offset') };
};

const stores = STORE_CASES;

describe.each(stores)('general streams bounds (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'refuses an oversized body with 413 and keeps nothing of it',
    async () => {
      gw = await start(urlFor(name, redisUrl));
      const url = `${gw.baseUrl}/v1/stream/bounded/bytes`;
      expect(
        (await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'a' })).status,
      ).toBe(201);
      const before = await read(gw.baseUrl, 'bounded/bytes');
      const big = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'x'.repeat(257),
      });
      expect(big.status).toBe(413);
      expect(await error(big)).toEqual({
        error: { code: 'body_too_large', message: 'request body exceeds 256 bytes' },
      });
      // Within the body bound but one message over the message bound (a byte stream's append is one message).
      const long = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'y'.repeat(65),
      });
      expect(long.status).toBe(413);
      expect(await error(long)).toEqual({
        error: { code: 'message_too_large', message: 'a message exceeds 64 bytes' },
      });
      expect(await read(gw.baseUrl, 'bounded/bytes')).toEqual(before);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'bounds a body sent without Content-Length (chunked) as it arrives: 413 past the bound, kept within it',
    async () => {
      gw = await start(urlFor(name, redisUrl));
      const path = '/v1/stream/bounded/chunked';
      const text = { 'content-type': 'text/plain' };
      expect((await fetch(`${gw.baseUrl}${path}`, { method: 'PUT', headers: text, body: 'a' })).status).toBe(
        201,
      );
      const before = await read(gw.baseUrl, 'bounded/chunked');
      // Two writes, no Content-Length: node sends the body chunked.
      const chunked = (parts: string[]): Promise<{ status: number; body: string }> =>
        new Promise((resolve, reject) => {
          const req = httpRequest(`${gw!.baseUrl}${path}`, { method: 'POST', headers: text }, (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString('utf8')));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('error', reject);
          for (const p of parts) req.write(p);
          req.end();
        });
      const big = await chunked(['x'.repeat(200), 'x'.repeat(57)]);
      expect(big.status).toBe(413);
      expect(JSON.parse(big.body)).toEqual({
        error: { code: 'body_too_large', message: 'request body exceeds 256 bytes' },
      });
      expect(await read(gw.baseUrl, 'bounded/chunked')).toEqual(before);
      const ok = await chunked(['b'.repeat(30), 'c'.repeat(30)]);
      expect(ok.status).toBe(204);
      expect((await read(gw.baseUrl, 'bounded/chunked')).body).toBe(`a${'b'.repeat(30)}${'c'.repeat(30)}`);
    },
  );

  it.skipIf(noRedis(name, redisUrl))('refuses a JSON batch with one oversized message whole', async () => {
    gw = await start(urlFor(name, redisUrl));
    const url = `${gw.baseUrl}/v1/stream/bounded/json`;
    const json = { 'content-type': 'application/json' };
    expect((await fetch(url, { method: 'PUT', headers: json, body: '[1]' })).status).toBe(201);
    const before = await read(gw.baseUrl, 'bounded/json');
    const batch = JSON.stringify([2, 'z'.repeat(70)]);
    const res = await fetch(url, { method: 'POST', headers: json, body: batch });
    expect(res.status).toBe(413);
    expect(await error(res)).toEqual({
      error: { code: 'message_too_large', message: 'a message exceeds 64 bytes' },
    });
    // Other refusals leave nothing either: invalid JSON, a producer gap, a Stream-Seq regression.
    const invalid = await fetch(url, { method: 'POST', headers: json, body: '[3,' });
    expect(invalid.status).toBe(400);
    expect(await error(invalid)).toEqual({
      error: { code: 'bad_request', message: 'body is not valid JSON' },
    });
    const gap = await fetch(url, {
      method: 'POST',
      headers: { ...json, 'producer-id': 'p', 'producer-epoch': '0', 'producer-seq': '3' },
      body: '[4]',
    });
    expect(gap.status).toBe(409);
    expect(gap.headers.get('producer-expected-seq')).toBe('0');
    expect(gap.headers.get('producer-received-seq')).toBe('3');
    expect(
      (await fetch(url, { method: 'POST', headers: { ...json, 'stream-seq': 'b' }, body: '[5]' })).status,
    ).toBe(204);
    const regress = await fetch(url, {
      method: 'POST',
      headers: { ...json, 'stream-seq': 'a' },
      body: '[6]',
    });
    expect(regress.status).toBe(409);
    expect(await error(regress)).toEqual({
      error: { code: 'stream_seq_conflict', message: 'Stream-Seq must exceed the last one appended' },
    });
    expect((await read(gw.baseUrl, 'bounded/json')).body).toBe(before.body.replace(']', ',5]'));
  });

  it.skipIf(noRedis(name, redisUrl))(
    'refuses a stream past maxStreams with 507 until one is deleted',
    async () => {
      gw = await start(urlFor(name, redisUrl));
      const put = (p: string) => fetch(`${gw!.baseUrl}/v1/stream/${p}`, { method: 'PUT' });
      expect((await put('one')).status).toBe(201);
      expect((await put('two')).status).toBe(201);
      const third = await put('three');
      expect(third.status).toBe(507);
      expect(await error(third)).toEqual({
        error: { code: 'too_many_streams', message: 'the gateway holds as many streams as it may' },
      });
      expect((await fetch(`${gw.baseUrl}/v1/stream/three`, { method: 'HEAD' })).status).toBe(404);
      // An existing stream's idempotent PUT is not a new stream.
      expect((await put('one')).status).toBe(200);
      expect((await fetch(`${gw.baseUrl}/v1/stream/two`, { method: 'DELETE' })).status).toBe(204);
      expect((await put('three')).status).toBe(201);
    },
  );
});

const key = (secret: string, scopes: string[], streams: string[] = []) => ({
  sha256: createHash('sha256').update(secret).digest('hex'),
  owner: secret,
  scopes,
  streams,
});
const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

describe('general streams and the write scope', () => {
  it('refuses a key without write with 403, lets a key with it write, and observe read', async () => {
    // Two owners share the stream through a grant (another owner's stream is otherwise 404).
    gw = await start(undefined, {
      auth: {
        apiKeys: [
          key('writer-key', ['write'], ['scoped']),
          key('submit-key', ['submit']),
          key('observe-key', ['observe'], ['scoped']),
        ],
      },
    });
    const url = `${gw.baseUrl}/v1/stream/scoped`;
    const anonymous = await fetch(url, { method: 'PUT' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="murmur-gateway"');
    const submit = await fetch(url, { method: 'PUT', headers: bearer('submit-key') });
    expect(submit.status).toBe(403);
    expect(await error(submit)).toEqual({ error: { code: 'forbidden', message: 'needs the "write" scope' } });
    expect((await fetch(url, { method: 'HEAD', headers: bearer('submit-key') })).status).toBe(403);

    const created = await fetch(url, {
      method: 'PUT',
      headers: { ...bearer('writer-key'), 'content-type': 'text/plain' },
      body: 'hello',
    });
    expect(created.status).toBe(201);
    const observer = await fetch(`${url}?offset=-1`, { headers: bearer('observe-key') });
    expect(observer.status).toBe(200);
    expect(await observer.text()).toBe('hello');
    const observerWrite = await fetch(url, {
      method: 'POST',
      headers: { ...bearer('observe-key'), 'content-type': 'text/plain' },
      body: 'nope',
    });
    expect(observerWrite.status).toBe(403);
    const append = await fetch(url, {
      method: 'POST',
      headers: { ...bearer('writer-key'), 'content-type': 'text/plain' },
      body: ' world',
    });
    expect(append.status).toBe(204);
    const all = await fetch(`${url}?offset=-1`, { headers: bearer('writer-key') });
    expect(await all.text()).toBe('hello world');
  });
});

describe('general streams over SSE', () => {
  it('tell a reader waiting at the tail of a close with nothing appended, then end', async () => {
    gw = await start(undefined);
    const url = `${gw.baseUrl}/v1/stream/sse-close`;
    expect(
      (await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'a' })).status,
    ).toBe(201);
    const res = await fetch(`${url}?offset=-1&live=sse`);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Bounded: a handful of reads reach the first upToDate control, then the close's.
    const until = async (needle: string): Promise<void> => {
      for (let i = 0; i < 20 && !text.includes(needle); i++) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    };
    await until('"upToDate":true');
    expect((await fetch(url, { method: 'POST', headers: { 'stream-closed': 'true' } })).status).toBe(204);
    await until('"streamClosed":true');
    expect(text).toContain('event: data\ndata:a\n\n');
    expect(text).toMatch(
      /event: control\ndata:\{"streamNextOffset":"[0-9_]+","streamClosed":true,"upToDate":true\}\n\n$/,
    );
    expect((await reader.read()).done).toBe(true);
  });
});

describe('general streams and browser tickets', () => {
  it('accept a ticket on live reads only', async () => {
    gw = await start(undefined, { auth: { apiKeys: [key('writer-key', ['write'])] } });
    const url = `${gw.baseUrl}/v1/stream/ticketed`;
    const put = {
      method: 'PUT',
      headers: { ...bearer('writer-key'), 'content-type': 'text/plain' },
      body: 'hi',
    };
    expect((await fetch(url, put)).status).toBe(201);
    const issued = await fetch(`${gw.baseUrl}/auth/tickets`, {
      method: 'POST',
      headers: bearer('writer-key'),
    });
    const { ticket } = (await issued.json()) as { ticket: string };
    const t = encodeURIComponent(ticket);
    const live = await fetch(`${url}?offset=-1&live=long-poll&ticket=${t}`);
    expect(live.status).toBe(200);
    expect(await live.text()).toBe('hi');
    // EventSource is the reason for tickets: a one-shot read takes the Authorization header.
    expect((await fetch(`${url}?offset=-1&ticket=${t}`)).status).toBe(401);
  });
});

describe('general streams switched off', () => {
  it('answers every method on /v1/stream/* but capsule streams with 404', async () => {
    gw = await startTestGateway({ capsules: {} });
    const url = `${gw.baseUrl}/v1/stream/some/stream`;
    for (const method of ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH']) {
      const res = await fetch(url, { method, ...(method === 'POST' ? { body: 'x' } : {}) });
      expect(res.status, method).toBe(404);
      if (method !== 'HEAD') {
        expect(await error(res)).toEqual({
          error: { code: 'not_found', message: 'general streams are off (durableStreams.writable is false)' },
        });
      }
    }
    // The capsule streams keep their own answers.
    const capsule = await fetch(`${gw.baseUrl}/v1/stream/murmur/no-such-capsule`);
    expect(capsule.status).toBe(404);
    expect(await capsule.json()).toEqual({ error: { code: 'not_found', message: 'no such stream' } });
  });
});

describe.each(stores)('the reserved __ds/ namespace (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'is never a stream: 501 on every method but the subscriptions, nothing created',
    async () => {
      gw = await start(urlFor(name, redisUrl));
      const refusal = {
        error: {
          code: 'not_implemented',
          message: '__ds/ is reserved for protocol extensions this gateway does not serve',
        },
      };
      for (const path of ['__ds', '__ds/extension/s1']) {
        for (const method of ['PUT', 'POST', 'GET', 'DELETE']) {
          const res = await fetch(`${gw.baseUrl}/v1/stream/${path}`, {
            method,
            headers: { 'content-type': 'application/json' },
            ...(method === 'PUT' || method === 'POST' ? { body: '{"webhook":"http://127.0.0.1:1/"}' } : {}),
          });
          expect({ path, method, status: res.status }).toEqual({ path, method, status: 501 });
          expect(await error(res)).toEqual(refusal);
        }
      }
      // The subscriptions are served there (durable-streams-subscriptions.md): never a stream either.
      const subscription = await fetch(`${gw.baseUrl}/v1/stream/__ds/subscriptions/s1`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: '{"webhook":"http://127.0.0.1:1/"}',
      });
      expect(subscription.status).toBe(400);
      expect(((await error(subscription)) as { error: { code: string } }).error.code).toBe('INVALID_REQUEST');
      // Nothing was created: the stream count is untouched, so the configured two still fit.
      for (const path of ['a', 'b']) {
        const res = await fetch(`${gw.baseUrl}/v1/stream/${path}`, { method: 'PUT' });
        expect(res.status).toBe(201);
      }
    },
  );
});
