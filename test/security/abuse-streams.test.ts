/**
 * The general Durable Streams as a hostile tenant tries them, on both stores (embedded and Redis):
 * every path names exactly one stream (dot segments in any spelling, control characters and
 * invalid UTF-8 refused before anything is normalised; `Stream-Forked-From` takes the `Location`
 * as returned), owners are isolated (another owner's stream is the 404 of a missing one; grants
 * share a prefix; each owner holds its share of maxStreams), bad values are 400 and nothing of them
 * is kept, every stored message can be read over SSE, and limits cover the stream surfaces (the
 * open-request cap; a refused upload leaves no half-dead keep-alive connection). Each refusal is
 * checked by its exact status and body, and by reading back that nothing changed.
 *
 * Bounded and on loopback: raw requests go through node:http (fetch would resolve `..` itself).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { noRedis, STORE_CASES, testRedisUrl, uniqueCapsule, urlFor } from '../support/redis.js';

const stores = STORE_CASES;

const sha = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

const start = async (
  redisUrl: string | undefined,
  durableStreams: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  capsules: Record<string, string> = {},
): Promise<TestGateway> => {
  const gw = await startTestGateway({
    capsules,
    ...(redisUrl ? { redisUrl } : {}),
    config: { longPollMaxMs: 1000 },
    extra: { durableStreams: { writable: true, ...durableStreams }, ...extra },
    tuning: { streams: { keyPrefix: `test:ds:abuse:${randomUUID()}` } },
  });
  stopAfterTest(gw);
  return gw;
};

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json: () => unknown;
}

/** One request with the path exactly as given (node:http sends it untouched). */
const raw = (
  gw: TestGateway,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: Buffer | string; agent?: http.Agent | false } = {},
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const { port } = new URL(gw.baseUrl);
    const body = options.body === undefined ? undefined : Buffer.from(options.body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: options.agent ?? false,
        headers: { ...options.headers, ...(body ? { 'content-length': String(body.length) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const all = Buffer.concat(chunks);
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            body: all,
            text: all.toString('utf8'),
            json: () => JSON.parse(all.toString('utf8')) as unknown,
          });
        });
        res.on('error', reject);
      },
    );
    // A refused upload may be cut while it is still being written: once answered, the answer is
    // what counts; an error before any answer fails the request.
    let answered = false;
    req.on('response', () => (answered = true));
    req.on('error', (err) => (answered ? undefined : reject(err)));
    req.end(body);
  });

const problem = (code: string, message: string) => ({ error: { code, message } });
const NO_SUCH_STREAM = problem('not_found', 'no such stream');
const CONTROL = problem('bad_request', 'the stream path holds a control character');
const NOT_UTF8 = problem('bad_request', 'the stream path is not valid percent-encoded UTF-8');

/** Status, body and tail of a stream (GET from the start). */
const readBack = async (
  gw: TestGateway,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; next: string | undefined }> => {
  const res = await raw(gw, 'GET', `/v1/stream/${path}?offset=-1`, { headers });
  return {
    status: res.status,
    text: res.text,
    next: res.headers['stream-next-offset'] as string | undefined,
  };
};

describe.each(stores)('a path names one stream (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'refuses dot segments in every spelling with 404 on every method, before the URL is normalised',
    async () => {
      const gw = await start(urlFor(name, redisUrl), { maxStreams: 3 });
      const text = { 'content-type': 'text/plain' };
      const dotted = [
        '/v1/stream/R/c/a/../b',
        '/v1/stream/R/c/a/%2e%2e/b',
        '/v1/stream/R/c/a/%2E%2E/b',
        '/v1/stream/R/c/a/.%2E/b',
        '/v1/stream/R/c/a/%2e./b',
        '/v1/stream/R/c/a/./b',
        '/v1/stream/R/c/a/%2e/b',
        '/v1/stream/R/c/a/%2E/b',
        '/v1/stream/R/../X',
        '/v1/stream/R/%2e%2e/X',
        '/v1/stream/b/..',
        '/v1/stream/a%2F..%2Fb',
        '/v1/stream/murmur/../R/c/b',
        '/x/../v1/stream/b',
      ];
      for (const path of dotted) {
        for (const method of ['PUT', 'POST', 'GET', 'DELETE']) {
          const res = await raw(gw, method, path, {
            headers: text,
            ...(method === 'PUT' || method === 'POST' ? { body: 'x' } : {}),
          });
          expect({ path, method, status: res.status }).toEqual({ path, method, status: 404 });
          expect(res.json()).toEqual(NO_SUCH_STREAM);
        }
        expect((await raw(gw, 'HEAD', path)).status).toBe(404);
      }
      // Nothing was created under any name the dotted paths normalise to.
      for (const path of ['R/c/b', 'X', 'b', 'R/c/a/b', 'a/b']) {
        expect((await raw(gw, 'HEAD', `/v1/stream/${path}`)).status).toBe(404);
      }
      // ... and the stream count is untouched: the configured three still fit, a fourth does not.
      for (const path of ['one', 'two', 'three']) {
        expect((await raw(gw, 'PUT', `/v1/stream/${path}`)).status).toBe(201);
      }
      expect((await raw(gw, 'PUT', '/v1/stream/four')).status).toBe(507);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'refuses control characters and invalid UTF-8 in a name with 400, creating nothing',
    async () => {
      const gw = await start(urlFor(name, redisUrl), { maxStreams: 1 });
      const cases: [string, unknown][] = [
        ['/v1/stream/a%00b', CONTROL],
        ['/v1/stream/a%0Ab', CONTROL],
        ['/v1/stream/a%0db', CONTROL],
        ['/v1/stream/a%1Bb', CONTROL],
        ['/v1/stream/a%7Fb', CONTROL],
        ['/v1/stream/a%C2%85b', CONTROL],
        ['/v1/stream/dir/%09/x', CONTROL],
        ['/v1/stream/a%FFb', NOT_UTF8],
        ['/v1/stream/a%C3%28', NOT_UTF8],
        ['/v1/stream/a%C0%AE%C0%AE', NOT_UTF8],
        ['/v1/stream/a%ED%A0%80', NOT_UTF8],
        ['/v1/stream/a%E0%A4%A', NOT_UTF8],
        ['/v1/stream/a%zz', NOT_UTF8],
      ];
      for (const [path, body] of cases) {
        for (const method of ['PUT', 'POST', 'GET', 'DELETE']) {
          const res = await raw(gw, method, path, {
            headers: { 'content-type': 'text/plain' },
            ...(method === 'PUT' || method === 'POST' ? { body: 'x' } : {}),
          });
          expect({ path, method, status: res.status }).toEqual({ path, method, status: 400 });
          expect(res.json()).toEqual(body);
          expect(res.headers['x-content-type-options']).toBe('nosniff');
        }
      }
      // A byte outside ASCII sent as it is (not percent-encoded) is no name either.
      const rawByte = await new Promise<string>((resolve, reject) => {
        const { port } = new URL(gw.baseUrl);
        const socket = net.connect(Number(port), '127.0.0.1', () => {
          socket.end(
            Buffer.concat([
              Buffer.from('PUT /v1/stream/a'),
              Buffer.from([0xff]),
              Buffer.from('b HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n'),
            ]),
          );
        });
        let got = '';
        socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
        socket.on('end', () => resolve(got));
        socket.on('error', reject);
      });
      expect(rawByte).toMatch(/^HTTP\/1\.1 400 /);
      // Nothing was created: the one stream the gateway may hold still fits.
      expect((await raw(gw, 'PUT', '/v1/stream/only')).status).toBe(201);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'forks from exactly the Location it returned, percent-encoded forms included',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const created = await raw(gw, 'PUT', '/v1/stream/enc%20dir/x%3Ay%25z', {
        headers: { 'content-type': 'text/plain' },
        body: 'inherited',
      });
      expect(created.status).toBe(201);
      const location = created.headers.location!;
      expect(location).toBe(`${gw.baseUrl}/v1/stream/enc%20dir/x%3Ay%25z`);
      // The same stream under its path and its URL.
      for (const [fork, from] of [
        ['f1', location],
        ['f2', new URL(location).pathname],
      ] as const) {
        const res = await raw(gw, 'PUT', `/v1/stream/${fork}`, { headers: { 'stream-forked-from': from } });
        expect({ fork, status: res.status }).toEqual({ fork, status: 201 });
        expect((await readBack(gw, fork)).text).toBe('inherited');
      }
      // Another spelling of a dot segment in the header is refused, and creates nothing.
      for (const from of [
        `${gw.baseUrl}/v1/stream/enc%20dir/%2e%2e/enc%20dir/x%3Ay%25z`,
        '/v1/stream/other/../enc%20dir/x%3Ay%25z',
        '/v1/stream/enc%20dir/x%00',
      ]) {
        const res = await raw(gw, 'PUT', '/v1/stream/f3', { headers: { 'stream-forked-from': from } });
        expect({ from, status: res.status }).toEqual({ from, status: 400 });
        expect(res.json()).toEqual(problem('bad_request', 'malformed Stream-Forked-From'));
      }
      expect((await raw(gw, 'HEAD', '/v1/stream/f3')).status).toBe(404);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'forks from the Location under a publicUrl with a path of its own',
    async () => {
      const gw = await startTestGateway({
        capsules: {},
        ...(redisUrl ? { redisUrl: urlFor(name, redisUrl)! } : {}),
        config: { publicUrl: 'https://gw.example/base/' },
        extra: { durableStreams: { writable: true } },
        tuning: { streams: { keyPrefix: `test:ds:abuse:${randomUUID()}` } },
      });
      stopAfterTest(gw);
      const created = await raw(gw, 'PUT', '/v1/stream/pub%20src', {
        headers: { 'content-type': 'text/plain' },
        body: 'p',
      });
      expect(created.headers.location).toBe('https://gw.example/base/v1/stream/pub%20src');
      const fork = await raw(gw, 'PUT', '/v1/stream/pub-fork', {
        headers: { 'stream-forked-from': created.headers.location! },
      });
      expect(fork.status).toBe(201);
      expect((await readBack(gw, 'pub-fork')).text).toBe('p');
    },
  );
});

const KEYS = {
  alice: 'abuse-alice-key-0123456789abcdef',
  bob: 'abuse-bob-key-0123456789abcdef01',
  teamOne: 'abuse-team-one-key-0123456789abc',
  teamTwo: 'abuse-team-two-key-0123456789abc',
  observer: 'abuse-observer-key-0123456789abc',
} as const;

const ownersConfig = {
  auth: {
    apiKeys: [
      { sha256: sha(KEYS.alice), owner: 'alice', scopes: ['write'] },
      { sha256: sha(KEYS.bob), owner: 'bob', scopes: ['write'] },
      { sha256: sha(KEYS.teamOne), owner: 'team-one', scopes: ['write'], streams: ['team-a/**'] },
      { sha256: sha(KEYS.teamTwo), owner: 'team-two', scopes: ['write'], streams: ['team-a/*'] },
      { sha256: sha(KEYS.observer), owner: 'observer', scopes: ['observe'], streams: ['team-a/**'] },
    ],
  },
};

describe.each(stores)('owners are isolated (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    "answers another owner's read, append, fork, delete and HEAD as a missing stream, changing nothing",
    async () => {
      const gw = await start(urlFor(name, redisUrl), { maxStreams: 20, maxStreamsPerOwner: 2 }, ownersConfig);
      const alice = bearer(KEYS.alice);
      const bob = bearer(KEYS.bob);
      const text = { 'content-type': 'text/plain' };
      expect(
        (await raw(gw, 'PUT', '/v1/stream/orders', { headers: { ...alice, ...text }, body: 'secret' }))
          .status,
      ).toBe(201);
      const before = await readBack(gw, 'orders', alice);
      expect(before.text).toBe('secret');

      const refusals: [string, string, Record<string, string>, string?][] = [
        ['GET', '/v1/stream/orders?offset=-1', {}],
        ['GET', `/v1/stream/orders?offset=${before.next}&live=long-poll`, {}],
        ['GET', '/v1/stream/orders?offset=-1&live=sse', {}],
        ['POST', '/v1/stream/orders', text, 'injected'],
        ['POST', '/v1/stream/orders', { 'stream-closed': 'true' }],
        ['DELETE', '/v1/stream/orders', {}],
      ];
      for (const [method, path, headers, body] of refusals) {
        const res = await raw(gw, method, path, {
          headers: { ...bob, ...headers },
          ...(body ? { body } : {}),
        });
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
        expect(res.json()).toEqual(NO_SUCH_STREAM);
      }
      expect((await raw(gw, 'HEAD', '/v1/stream/orders', { headers: bob })).status).toBe(404);
      const fork = await raw(gw, 'PUT', '/v1/stream/stolen', {
        headers: { ...bob, 'stream-forked-from': '/v1/stream/orders' },
      });
      expect(fork.status).toBe(404);
      expect(fork.json()).toEqual(problem('not_found', 'no such source stream (Stream-Forked-From)'));
      expect((await raw(gw, 'HEAD', '/v1/stream/stolen', { headers: bob })).status).toBe(404);

      // Bob's `orders` is a stream of his own: creating it tells nothing of Alice's.
      expect(
        (await raw(gw, 'PUT', '/v1/stream/orders', { headers: { ...bob, ...text }, body: 'mine' })).status,
      ).toBe(201);
      expect((await readBack(gw, 'orders', bob)).text).toBe('mine');
      expect(await readBack(gw, 'orders', alice)).toEqual(before);
      const head = await raw(gw, 'HEAD', '/v1/stream/orders', { headers: alice });
      expect(head.status).toBe(200);
      expect(head.headers['stream-closed']).toBeUndefined();
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'shares a granted prefix between owners, and no further than the grant',
    async () => {
      const gw = await start(urlFor(name, redisUrl), { maxStreams: 20, maxStreamsPerOwner: 5 }, ownersConfig);
      const text = { 'content-type': 'text/plain' };
      const one = bearer(KEYS.teamOne);
      const two = bearer(KEYS.teamTwo);
      expect(
        (await raw(gw, 'PUT', '/v1/stream/team-a/log', { headers: { ...one, ...text }, body: 'x' })).status,
      ).toBe(201);
      expect(
        (await raw(gw, 'POST', '/v1/stream/team-a/log', { headers: { ...two, ...text }, body: 'y' })).status,
      ).toBe(204);
      expect((await readBack(gw, 'team-a/log', one)).text).toBe('xy');
      // An observe key granted the prefix reads it; through a ticket too (it carries the grant).
      expect((await readBack(gw, 'team-a/log', bearer(KEYS.observer))).text).toBe('xy');
      const issued = await raw(gw, 'POST', '/auth/tickets', { headers: bearer(KEYS.observer) });
      const { ticket } = issued.json() as { ticket: string };
      const live = await raw(
        gw,
        'GET',
        `/v1/stream/team-a/log?offset=-1&live=long-poll&ticket=${encodeURIComponent(ticket)}`,
      );
      expect(live.status).toBe(200);
      expect(live.text).toBe('xy');
      // Deeper than team-two's `team-a/*`: its own stream, not the shared one.
      expect(
        (await raw(gw, 'PUT', '/v1/stream/team-a/deep/log', { headers: { ...one, ...text }, body: 'd' }))
          .status,
      ).toBe(201);
      const deep = await raw(gw, 'GET', '/v1/stream/team-a/deep/log?offset=-1', { headers: two });
      expect(deep.status).toBe(404);
      expect(deep.json()).toEqual(NO_SUCH_STREAM);
      // An owner without the grant names a stream of its own under that path.
      const outsider = await raw(gw, 'GET', '/v1/stream/team-a/log?offset=-1', {
        headers: bearer(KEYS.alice),
      });
      expect(outsider.status).toBe(404);
      expect(outsider.json()).toEqual(NO_SUCH_STREAM);
      expect((await readBack(gw, 'team-a/log', one)).text).toBe('xy');
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    "gives each owner its share of maxStreams: one owner's full share refuses only that owner",
    async () => {
      const gw = await start(urlFor(name, redisUrl), { maxStreams: 20, maxStreamsPerOwner: 2 }, ownersConfig);
      const alice = bearer(KEYS.alice);
      const put = (path: string, headers: Record<string, string>) =>
        raw(gw, 'PUT', `/v1/stream/${path}`, { headers });
      expect((await put('a1', alice)).status).toBe(201);
      expect((await put('a2', alice)).status).toBe(201);
      const full = await put('a3', alice);
      expect(full.status).toBe(507);
      expect(full.json()).toEqual(
        problem(
          'too_many_streams',
          'this owner holds as many streams as it may (durableStreams.maxStreamsPerOwner)',
        ),
      );
      expect((await raw(gw, 'HEAD', '/v1/stream/a3', { headers: alice })).status).toBe(404);
      // A fork counts too; an idempotent PUT of an existing stream does not.
      const forked = await raw(gw, 'PUT', '/v1/stream/a4', {
        headers: { ...alice, 'stream-forked-from': '/v1/stream/a1' },
      });
      expect(forked.status).toBe(507);
      expect((await put('a1', alice)).status).toBe(200);
      // Another owner is not affected; a stream created under a grant counts for its creator.
      expect((await put('b1', bearer(KEYS.bob))).status).toBe(201);
      expect((await put('team-a/t1', bearer(KEYS.teamOne))).status).toBe(201);
      expect((await put('team-a/t2', bearer(KEYS.teamOne))).status).toBe(201);
      expect((await put('team-a/t3', bearer(KEYS.teamTwo))).status).toBe(201);
      expect((await put('team-a/t4', bearer(KEYS.teamOne))).status).toBe(507);
      // A deleted stream frees its owner's share, whoever deletes it.
      expect(
        (await raw(gw, 'DELETE', '/v1/stream/team-a/t1', { headers: bearer(KEYS.teamTwo) })).status,
      ).toBe(204);
      expect((await put('team-a/t4', bearer(KEYS.teamOne))).status).toBe(201);
      expect((await raw(gw, 'DELETE', '/v1/stream/a2', { headers: alice })).status).toBe(204);
      expect((await put('a3', alice)).status).toBe(201);
    },
  );
});

describe.each(stores)('bad values are 400 and leave nothing behind (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'refuses a TTL beyond what the store holds and impossible dates; creates nothing',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const refusals: [Record<string, string>, string][] = [
        [{ 'stream-ttl': '99999999999' }, 'Stream-TTL must be at most 3155760000 seconds'],
        [{ 'stream-ttl': '3155760001' }, 'Stream-TTL must be at most 3155760000 seconds'],
        [{ 'stream-ttl': '99999999999999999999' }, 'Stream-TTL must be a non-negative decimal integer'],
        ...[
          '2099-02-30T00:00:00Z',
          '2100-02-29T00:00:00Z',
          '2099-04-31T00:00:00Z',
          '2099-13-01T00:00:00Z',
          '2099-00-10T00:00:00Z',
          '2099-01-01T24:00:00Z',
          '2099-01-01T23:60:00Z',
          '2099-01-01T23:59:60Z',
          '2099-01-01T00:00:00+24:00',
          '1969-12-31T23:59:59Z',
          '0000-01-01T00:00:00Z',
        ].map((at): [Record<string, string>, string] => [
          { 'stream-expires-at': at },
          'Stream-Expires-At must be an RFC 3339 timestamp of a real instant from 1970 on',
        ]),
      ];
      for (const [headers, message] of refusals) {
        const res = await raw(gw, 'PUT', '/v1/stream/bad-config', { headers });
        expect({ headers, status: res.status }).toEqual({ headers, status: 400 });
        expect(res.json()).toEqual(problem('bad_request', message));
        expect((await raw(gw, 'HEAD', '/v1/stream/bad-config')).status).toBe(404);
      }
      // The bounds themselves hold, and the store answers them as it was asked.
      const longest = await raw(gw, 'PUT', '/v1/stream/longest', { headers: { 'stream-ttl': '3155760000' } });
      expect(longest.status).toBe(201);
      const head = await raw(gw, 'HEAD', '/v1/stream/longest');
      expect(Number(head.headers['stream-ttl'])).toBeGreaterThan(3155760000 - 60);
      const leap = await raw(gw, 'PUT', '/v1/stream/leap-day', {
        headers: { 'stream-expires-at': '2096-02-29T23:59:59.5+01:00' },
      });
      expect(leap.status).toBe(201);
      expect((await raw(gw, 'HEAD', '/v1/stream/leap-day')).headers['stream-expires-at']).toBe(
        '2096-02-29T23:59:59.5+01:00',
      );
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'refuses JSON nested past 128 levels and invalid UTF-8 with 400; the stream is unchanged',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const json = { 'content-type': 'application/json' };
      expect((await raw(gw, 'PUT', '/v1/stream/j', { headers: json, body: '[1]' })).status).toBe(201);
      const before = await readBack(gw, 'j');
      const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
      const refusals: [Buffer | string, string][] = [
        [nested(100_000), 'body nests JSON deeper than 128 levels'],
        [nested(129), 'body nests JSON deeper than 128 levels'],
        ['{"a":'.repeat(200) + '1' + '}'.repeat(200), 'body nests JSON deeper than 128 levels'],
        [Buffer.from([0x5b, 0x22, 0xff, 0x22, 0x5d]), 'body is not valid UTF-8'],
        [Buffer.from('["\xed\xa0\x80"]', 'latin1'), 'body is not valid UTF-8'],
        [Buffer.from('{"k":"\xc3"}', 'latin1'), 'body is not valid UTF-8'],
      ];
      for (const [body, message] of refusals) {
        const res = await raw(gw, 'POST', '/v1/stream/j', { headers: json, body });
        expect({ message, status: res.status }).toEqual({ message, status: 400 });
        expect(res.json()).toEqual(problem('bad_request', message));
        // A create with such a body creates nothing.
        const put = await raw(gw, 'PUT', '/v1/stream/j2', { headers: json, body });
        expect(put.status).toBe(400);
        expect((await raw(gw, 'HEAD', '/v1/stream/j2')).status).toBe(404);
      }
      expect(await readBack(gw, 'j')).toEqual(before);
      // Brackets inside strings are no nesting; 128 levels, the batch's array included, are taken.
      const deepest = `[${nested(127)}, "${'['.repeat(500)}"]`;
      expect((await raw(gw, 'POST', '/v1/stream/j', { headers: json, body: deepest })).status).toBe(204);
      expect((await readBack(gw, 'j')).text).toBe(`[1,${nested(127)},"${'['.repeat(500)}"]`);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'answers an empty Stream-Seq after 5 with 409 and appends nothing',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const text = { 'content-type': 'text/plain' };
      expect((await raw(gw, 'PUT', '/v1/stream/seq', { headers: text })).status).toBe(201);
      expect(
        (await raw(gw, 'POST', '/v1/stream/seq', { headers: { ...text, 'stream-seq': '5' }, body: 'a' }))
          .status,
      ).toBe(204);
      const before = await readBack(gw, 'seq');
      const empty = await raw(gw, 'POST', '/v1/stream/seq', {
        headers: { ...text, 'stream-seq': '' },
        body: 'b',
      });
      expect(empty.status).toBe(409);
      expect(empty.json()).toEqual(
        problem('stream_seq_conflict', 'Stream-Seq must exceed the last one appended'),
      );
      expect(await readBack(gw, 'seq')).toEqual(before);
      // On a stream without one, an empty Stream-Seq is the lowest value: a second one is 409 too.
      expect((await raw(gw, 'PUT', '/v1/stream/seq2', { headers: text })).status).toBe(201);
      const first = { headers: { ...text, 'stream-seq': '' }, body: 'x' };
      expect((await raw(gw, 'POST', '/v1/stream/seq2', first)).status).toBe(204);
      expect((await raw(gw, 'POST', '/v1/stream/seq2', first)).status).toBe(409);
      expect((await readBack(gw, 'seq2')).text).toBe('x');
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'hands back the largest producer epoch and seq exactly as accepted',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const text = { 'content-type': 'text/plain' };
      const top = String(Number.MAX_SAFE_INTEGER);
      expect((await raw(gw, 'PUT', '/v1/stream/p', { headers: text })).status).toBe(201);
      const producer = (epoch: string, seq: string) => ({
        ...text,
        'producer-id': 'p',
        'producer-epoch': epoch,
        'producer-seq': seq,
      });
      const first = await raw(gw, 'POST', '/v1/stream/p', { headers: producer(top, '0'), body: 'a' });
      expect(first.status).toBe(200);
      expect(first.headers['producer-epoch']).toBe(top);
      const stale = await raw(gw, 'POST', '/v1/stream/p', { headers: producer('0', '0'), body: 'b' });
      expect(stale.status).toBe(403);
      expect(stale.headers['producer-epoch']).toBe(top);
      const retry = await raw(gw, 'POST', '/v1/stream/p', { headers: producer(top, '0'), body: 'a' });
      expect(retry.status).toBe(204);
      expect(retry.headers['producer-epoch']).toBe(top);
      const gap = await raw(gw, 'POST', '/v1/stream/p', { headers: producer(top, top), body: 'c' });
      expect(gap.status).toBe(409);
      expect(gap.headers['producer-expected-seq']).toBe('1');
      expect(gap.headers['producer-received-seq']).toBe(top);
      const beyond = await raw(gw, 'POST', '/v1/stream/p', {
        headers: producer('9007199254740993', '0'),
        body: 'd',
      });
      expect(beyond.status).toBe(400);
      expect((await readBack(gw, 'p')).text).toBe('a');
    },
  );
});

describe.skipIf(noRedis('Redis', testRedisUrl()))('a store that answers with an error', () => {
  it('is a 500, never a 503 that invites a blind retry', async () => {
    const redisUrl = urlFor('Redis', testRedisUrl())!;
    const keyPrefix = `test:ds:abuse:${randomUUID()}`;
    const gw = await startTestGateway({
      capsules: {},
      redisUrl,
      extra: { durableStreams: { writable: true } },
      tuning: { streams: { keyPrefix } },
    });
    stopAfterTest(gw);
    const text = { 'content-type': 'text/plain' };
    expect(
      (await raw(gw, 'PUT', '/v1/stream/broken', { headers: { ...text, 'stream-ttl': '60' }, body: 'a' }))
        .status,
    ).toBe(201);
    // A meta hash no script wrote: the append's script fails while running (Redis answers ERR).
    const client = new Redis(redisUrl);
    try {
      await client.hset(`${keyPrefix}:{streams}:m:broken`, 'ttl', 'not-a-number');
    } finally {
      client.disconnect();
    }
    const res = await raw(gw, 'POST', '/v1/stream/broken', { headers: text, body: 'b' });
    expect(res.status).toBe(500);
    expect(res.json()).toEqual(problem('internal', 'internal error'));
    expect(res.headers['retry-after']).toBeUndefined();
  });
});

/** An SSE read from `offset=-1` until the first upToDate control: the data events and the controls. */
const readSse = async (
  gw: TestGateway,
  path: string,
): Promise<{ data: string[]; controls: Record<string, unknown>[]; encoding: string | undefined }> => {
  const res = await fetch(`${gw.baseUrl}/v1/stream/${path}?offset=-1&live=sse`);
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  const data: string[] = [];
  const controls: Record<string, unknown>[] = [];
  try {
    // Bounded by the stream itself: it ends at the byte bound or after the upToDate control.
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      // Scanned from where the last scan stopped: an event of megabytes arrives in many chunks.
      const scanFrom = Math.max(0, buffered.length - 1);
      buffered += decoder.decode(value, { stream: true });
      let end = buffered.indexOf('\n\n', scanFrom);
      for (; end !== -1; end = buffered.indexOf('\n\n')) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const lines = block.split('\n');
        const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
        const payload = lines
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5))
          .join('\n');
        if (event === 'data') data.push(payload);
        if (event === 'control') controls.push(JSON.parse(payload) as Record<string, unknown>);
      }
      if (controls.at(-1)?.upToDate === true) break;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return { data, controls, encoding: res.headers.get('stream-sse-data-encoding') ?? undefined };
};

describe.each(stores)('every stored message can be read over SSE (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'streams 16 × 60 KB binary messages and messages at maxMessageBytes, every byte',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const binary = { 'content-type': 'application/octet-stream' };
      expect((await raw(gw, 'PUT', '/v1/stream/bin', { headers: binary })).status).toBe(201);
      const sent: Buffer[] = [];
      const append = async (bytes: Buffer): Promise<void> => {
        const res = await raw(gw, 'POST', '/v1/stream/bin', { headers: binary, body: bytes });
        expect(res.status).toBe(204);
        sent.push(bytes);
      };
      for (let i = 0; i < 16; i++) await append(randomBytes(60_000));
      // At the limit: maxMessageBytes (1 MiB by default), twice.
      await append(randomBytes(1024 * 1024));
      await append(randomBytes(1024 * 1024));
      const { data, controls, encoding } = await readSse(gw, 'bin');
      expect(encoding).toBe('base64');
      // Compared by digest: a deep equality of megabytes is slow to compute and unreadable when it fails.
      const received = Buffer.concat(data.map((d) => Buffer.from(d, 'base64')));
      expect(received.length).toBe(16 * 60_000 + 2 * 1024 * 1024);
      expect(sha(received)).toBe(sha(Buffer.concat(sent)));
      const tail = (await raw(gw, 'HEAD', '/v1/stream/bin')).headers['stream-next-offset'];
      expect(controls.at(-1)).toMatchObject({ streamNextOffset: tail, upToDate: true });
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'streams a text message at maxMessageBytes made of line breaks, and JSON messages at the limit',
    async () => {
      const gw = await start(urlFor(name, redisUrl));
      const text = { 'content-type': 'text/plain' };
      expect((await raw(gw, 'PUT', '/v1/stream/lines', { headers: text })).status).toBe(201);
      const lines = 'a\n'.repeat(512 * 1024);
      expect((await raw(gw, 'POST', '/v1/stream/lines', { headers: text, body: lines })).status).toBe(204);
      const read = await readSse(gw, 'lines');
      const got = read.data.join('');
      expect(got.length).toBe(lines.length);
      expect(got === lines).toBe(true);

      const json = { 'content-type': 'application/json' };
      expect((await raw(gw, 'PUT', '/v1/stream/big-json', { headers: json })).status).toBe(201);
      // One message of exactly 1 MiB (its JSON text), twice.
      const message = JSON.stringify('x'.repeat(1024 * 1024 - 2));
      for (let i = 0; i < 2; i++) {
        const res = await raw(gw, 'POST', '/v1/stream/big-json', { headers: json, body: message });
        expect(res.status).toBe(204);
      }
      const big = await readSse(gw, 'big-json');
      const messages = big.data.flatMap((d) => JSON.parse(d) as string[]);
      expect(messages.length).toBe(2);
      expect(messages.every((m) => JSON.stringify(m) === message)).toBe(true);
    },
  );
});

describe.each(stores)('limits cover the stream surfaces (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'holds streamsPerKey on /v1/stream/murmur/{c} and on the general streams, answered in the surface grammar',
    async () => {
      const sim = await startSimulator();
      stopAfterTest(sim);
      const cap = uniqueCapsule('abuse-ds');
      const key = 'abuse-streams-per-key-0123456789';
      const gw = await start(
        urlFor(name, redisUrl),
        {},
        {
          auth: { apiKeys: [{ sha256: sha(key), owner: 'reader', scopes: ['observe', 'write'] }] },
          limits: { streamsPerKey: 1 },
        },
        { [cap]: sim.url },
      );
      const auth = bearer(key);
      const refused = problem('rate_limited', 'too many requests, retry later');
      const holding = new AbortController();
      const held = await fetch(`${gw.baseUrl}/v1/stream/murmur/${cap}?offset=now&live=sse`, {
        headers: auth,
        signal: holding.signal,
      });
      expect(held.status).toBe(200);
      for (const path of [`/v1/stream/murmur/${cap}?offset=-1`, '/v1/stream/mine']) {
        const res = await raw(gw, 'GET', path, { headers: auth });
        expect({ path, status: res.status }).toEqual({ path, status: 429 });
        expect(res.json()).toEqual(refused);
        expect(res.headers['retry-after']).toBe('5');
      }
      holding.abort();
      await held.body?.cancel().catch(() => undefined);
      // The slot is released when the held stream's socket closes (a moment after the abort).
      let status = 429;
      for (let i = 0; i < 50 && status === 429; i++) {
        const res = await raw(gw, 'GET', `/v1/stream/murmur/${cap}?offset=-1`, { headers: auth });
        status = res.status;
        if (status === 429) await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).toBe(200);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'closes the connection after refusing an upload it did not read, so a pooled client goes on',
    async () => {
      const gw = await start(urlFor(name, redisUrl), { maxBodyBytes: 64 * 1024 });
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const text = { 'content-type': 'text/plain' };
        expect((await raw(gw, 'PUT', '/v1/stream/up', { headers: text, body: 'a', agent })).status).toBe(201);
        const before = await readBack(gw, 'up');
        for (let i = 0; i < 3; i++) {
          const big = await raw(gw, 'POST', '/v1/stream/up', {
            headers: text,
            body: Buffer.alloc(4 * 1024 * 1024, 0x61),
            agent,
          });
          expect(big.status).toBe(413);
          expect(big.json()).toEqual(problem('body_too_large', 'request body exceeds 65536 bytes'));
          // At once, on the same pool: served, not lost with a dropped socket.
          const next = await raw(gw, 'HEAD', '/v1/stream/up', { agent });
          expect(next.status).toBe(200);
          expect(big.headers.connection).toBe('close');
        }
        // A refusal whose body did arrive whole keeps the connection.
        const small = await raw(gw, 'POST', '/v1/stream/up', {
          headers: text,
          body: Buffer.alloc(64 * 1024 + 1, 0x61),
          agent,
        });
        expect(small.status).toBe(413);
        expect(await readBack(gw, 'up')).toEqual(before);
      } finally {
        agent.destroy();
      }
    },
  );
});
