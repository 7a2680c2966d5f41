/**
 * The general streams' append served before Hono (src/http/direct-routes.ts) answers every request
 * exactly as the Hono route does: the same requests go to a gateway with its direct routes and to
 * one without (`tuning.http.directRoutes: false`), on both stores, and every answer (status, body,
 * headers but the date) and what was stored must be the same; the first gateway must have served
 * them directly, the second not one. Then what only a socket shows: a refusal before the body
 * arrived closes the connection, a body that never completes is cut by its deadline and stores
 * nothing, the abuse bounds refuse in the surface's grammar, and targets the direct route must not
 * take (escapes, queries, chunked bodies, dot segments, the extensions' and capsule paths) go to Hono.
 */
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { stopAfterTest } from '../../support/stop-after-test.js';
import { noRedis, STORE_CASES, urlFor } from '../../support/redis.js';

const key = (secret: string, scopes: ('write' | 'observe')[]) => ({
  sha256: createHash('sha256').update(secret).digest('hex'),
  owner: 'shared-owner',
  scopes,
});
const bearer = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });
const WRITER = bearer('writer-key');

const start = async (
  redisUrl: string | undefined,
  direct: boolean,
  extra: Record<string, unknown> = {},
): Promise<TestGateway> => {
  const gw = await startTestGateway({
    capsules: {},
    ...(redisUrl ? { redisUrl } : {}),
    extra: {
      durableStreams: { writable: true, maxBodyBytes: 4096, maxMessageBytes: 512 },
      auth: { apiKeys: [key('writer-key', ['write']), key('observe-key', ['observe'])] },
      ...extra,
    },
    tuning: { streams: { keyPrefix: `test:ds:direct:${randomUUID()}` }, http: { directRoutes: direct } },
  });
  stopAfterTest(gw);
  return gw;
};

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * One request over its own connection, the target exactly as given. `headers` is a flat list
 * (name, value, …) so a header can be sent twice. The date and the connection's own headers are
 * left out of the answer; an offset or ETag loses its epoch (a Redis stream's is a time).
 */
const send = (
  gw: TestGateway,
  method: string,
  path: string,
  headers: string[],
  body?: string | Buffer,
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port: new URL(gw.baseUrl).port,
        method,
        path,
        agent: false,
        headers: [
          // A list of headers gets no Host of its own.
          ...(headers.includes('host') ? [] : ['host', `127.0.0.1:${new URL(gw.baseUrl).port}`]),
          ...headers,
          // A chunked body says so itself (both at once is no valid request).
          ...(payload && !headers.includes('transfer-encoding')
            ? ['content-length', String(payload.length)]
            : []),
        ],
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const kept: Record<string, string> = {};
          for (const [name, value] of Object.entries(res.headers)) {
            if (['date', 'connection', 'keep-alive'].includes(name) || value === undefined) continue;
            const text = String(value);
            kept[name] =
              name === 'stream-next-offset'
                ? text.split('_')[1]!
                : name === 'etag'
                  ? text.replace(/^"\d+:/, '"')
                  : text;
          }
          resolve({ status: res.statusCode!, headers: kept, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });

const JSON_TYPE = ['content-type', 'application/json'];
const BYTES_TYPE = ['content-type', 'application/octet-stream'];
const auth = (secret: string): string[] => ['authorization', `Bearer ${secret}`];
const W = auth('writer-key');

/** Every append outcome and refusal of the route, in order (each may depend on the ones before). */
const REQUESTS: [string, string[], (string | Buffer)?][] = [
  ['j', [...W, ...JSON_TYPE], '{"a":1}'],
  ['j', [...W, ...JSON_TYPE], '{ "spaced" : [1, 2] }'],
  ['j', [...W, ...JSON_TYPE], '[{"b":1},{"b":2},"three"]'],
  ['j', [...W, ...JSON_TYPE], `[${'{},'.repeat(199)}{}]`],
  ['j', [...W, ...JSON_TYPE], `${'['.repeat(129)}${']'.repeat(129)}`],
  ['j', [...W, ...JSON_TYPE], '{"a":'],
  ['j', [...W, ...JSON_TYPE], '[]'],
  ['j', [...W, ...JSON_TYPE], Buffer.from([0x22, 0xff, 0x22])],
  ['j', [...W, ...JSON_TYPE], JSON.stringify({ p: 'x'.repeat(600) })],
  ['j', [...W, ...JSON_TYPE], JSON.stringify(['y'.repeat(5000)])],
  ['j', [...W, 'content-type', 'application/json', 'content-type', 'application/json'], '{"dup":1}'],
  ['j', [...W, ...BYTES_TYPE], 'bytes'],
  ['j', [...W], '{"untyped":1}'],
  ['j', [...W, ...JSON_TYPE], ''],
  ['j', [...W, ...JSON_TYPE, 'stream-seq', 'b'], '{"seq":"b"}'],
  ['j', [...W, ...JSON_TYPE, 'stream-seq', 'a'], '{"seq":"a"}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1'], '{"partial":1}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1', 'producer-epoch', '0', 'producer-seq', '0'], '{"p":0}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1', 'producer-epoch', '0', 'producer-seq', '0'], '{"p":0}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1', 'producer-epoch', '0', 'producer-seq', '2'], '{"p":2}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1', 'producer-epoch', '1', 'producer-seq', '1'], '{"p":1}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1', 'producer-epoch', '1', 'producer-seq', '0'], '{"e":1}'],
  ['j', [...W, ...JSON_TYPE, 'producer-id', 'p1', 'producer-epoch', '0', 'producer-seq', '1'], '{"e":0}'],
  ['j', [...JSON_TYPE], '{"anonymous":1}'],
  ['j', [...auth('wrong-key'), ...JSON_TYPE], '{"refused":1}'],
  ['j', [...auth('observe-key'), ...JSON_TYPE], '{"observer":1}'],
  ['missing', [...W, ...JSON_TYPE], '{"nowhere":1}'],
  ['b', [...W, ...BYTES_TYPE], 'raw bytes'],
  ['b', [...W, 'content-type', 'Application/Octet-Stream; x=1'], 'typed alike'],
  ['b', [...W, ...BYTES_TYPE], 'z'.repeat(513)],
  ['b', [...W, ...BYTES_TYPE], 'z'.repeat(4097)],
  ['b', [...W, 'stream-closed', 'true'], ''],
  ['b', [...W, ...BYTES_TYPE], 'after close'],
];

const PREFIX = '/v1/stream/';

const run = async (gw: TestGateway): Promise<{ answers: Answer[]; reads: Answer[] }> => {
  for (const [path, type] of [
    ['j', 'application/json'],
    ['b', 'application/octet-stream'],
  ] as const) {
    const created = await send(gw, 'PUT', `${PREFIX}${path}`, [...W, 'content-type', type]);
    expect(created.status).toBe(201);
  }
  const answers: Answer[] = [];
  for (const [path, headers, body] of REQUESTS)
    answers.push(await send(gw, 'POST', `${PREFIX}${path}`, headers, body));
  const reads = [
    await send(gw, 'GET', `${PREFIX}j?offset=-1`, W),
    await send(gw, 'GET', `${PREFIX}b?offset=-1`, W),
  ];
  return { answers, reads };
};

describe.each(STORE_CASES)('an append served before Hono (%s store)', (name, redisUrl) => {
  it.skipIf(noRedis(name, redisUrl))(
    'answers every outcome and refusal exactly as the Hono route, and stores the same',
    async () => {
      const direct = await start(urlFor(name, redisUrl), true);
      const viaHono = await start(urlFor(name, redisUrl), false);
      const served = direct.gateway.directServed();
      const a = await run(direct);
      expect(direct.gateway.directServed() - served).toBe(REQUESTS.length);
      const b = await run(viaHono);
      expect(viaHono.gateway.directServed()).toBe(0);
      for (let i = 0; i < REQUESTS.length; i++) {
        expect({ request: REQUESTS[i]!.slice(0, 2), ...a.answers[i]! }).toEqual({
          request: REQUESTS[i]!.slice(0, 2),
          ...b.answers[i]!,
        });
      }
      expect(a.reads).toEqual(b.reads);
      // The outcomes themselves, so that two equal wrongs do not pass.
      expect(a.answers.map((x) => x.status)).toEqual([
        204, 204, 204, 204, 400, 400, 400, 400, 413, 413, 400, 409, 400, 400, 204, 409, 400, 200, 204, 409,
        400, 200, 403, 401, 401, 403, 404, 204, 204, 413, 413, 204, 409,
      ]);
      expect(a.answers[4]!.body).toBe(
        JSON.stringify({ error: { code: 'bad_request', message: 'body nests JSON deeper than 128 levels' } }),
      );
      expect(a.answers[23]!.headers['www-authenticate']).toBe('Bearer realm="murmur-gateway"');
      expect(a.answers[24]!.headers['www-authenticate']).toBe(
        'Bearer realm="murmur-gateway", error="invalid_token"',
      );
      expect(a.answers[19]!.headers).toMatchObject({
        'producer-expected-seq': '1',
        'producer-received-seq': '2',
      });
      // A compact message is kept as sent, a spaced one as it serialises.
      const messages = JSON.parse(a.reads[0]!.body) as unknown[];
      expect(messages.slice(0, 5)).toEqual([{ a: 1 }, { spaced: [1, 2] }, { b: 1 }, { b: 2 }, 'three']);
      expect(a.reads[0]!.body.startsWith('[{"a":1},{"spaced":[1,2]},')).toBe(true);
    },
  );
});

/** Raw bytes to the gateway; resolves with everything it sent back once it closed the connection. */
const rawExchange = (gw: TestGateway, head: string, body = ''): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(Number(new URL(gw.baseUrl).port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.write(head + body);
  });

describe('an append served before Hono, at the socket', () => {
  it('closes the connection after a refusal answered before the body arrived', async () => {
    for (const direct of [true, false]) {
      const gw = await start(undefined, direct);
      const before = gw.gateway.directServed();
      const answer = await rawExchange(
        gw,
        'POST /v1/stream/j HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n',
        '{"partial":',
      );
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
      expect(answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
      expect(
        answer.endsWith(JSON.stringify({ error: { code: 'unauthorized', message: 'credentials required' } })),
      ).toBe(true);
      expect(gw.gateway.directServed() - before).toBe(direct ? 1 : 0);
    }
  });

  it('cuts a body that does not complete within its deadline and stores nothing of it', async () => {
    const gw = await start(undefined, true, { server: { bodyTimeoutMs: 200 } });
    const url = `${gw.baseUrl}${PREFIX}slow`;
    expect(
      (await fetch(url, { method: 'PUT', headers: { ...WRITER, 'content-type': 'text/plain' } })).status,
    ).toBe(201);
    const before = gw.gateway.directServed();
    const answer = await rawExchange(
      gw,
      'POST /v1/stream/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer writer-key\r\n' +
        'Content-Type: text/plain\r\nContent-Length: 100\r\n\r\n',
      'only part of it',
    );
    expect(gw.gateway.directServed() - before).toBe(1);
    expect(answer.split('\r\n')[0], answer).toBe('HTTP/1.1 408 Request Timeout');
    // Sent chunked, then the connection closes.
    expect(answer).toContain(
      `\r\n${JSON.stringify({ error: { code: 'request_timeout', message: 'request body took too long' } })}\r\n`,
    );
    const read = await fetch(`${url}?offset=-1`, { headers: WRITER });
    expect(read.status).toBe(200);
    expect(await read.text()).toBe('');
  });

  it('refuses past an abuse bound with the surface 429, as the Hono route does', async () => {
    const answers: Answer[][] = [];
    for (const direct of [true, false]) {
      // One request per 1,000 s, two at once: the PUT and one POST, then the bound.
      const gw = await start(undefined, direct, { limits: { ip: { requestsPerSecond: 0.001, burst: 2 } } });
      const before = gw.gateway.directServed();
      expect((await send(gw, 'PUT', `${PREFIX}j`, [...W, ...JSON_TYPE])).status).toBe(201);
      const got = [
        await send(gw, 'POST', `${PREFIX}j`, [...W, ...JSON_TYPE], '{"first":1}'),
        await send(gw, 'POST', `${PREFIX}j`, [...W, ...JSON_TYPE], '{"second":2}'),
      ];
      expect(gw.gateway.directServed() - before).toBe(direct ? 2 : 0);
      answers.push(got);
    }
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0]![0]!.status).toBe(204);
    expect(answers[0]![1]!).toMatchObject({
      status: 429,
      body: JSON.stringify({ error: { code: 'rate_limited', message: 'too many requests, retry later' } }),
    });
    expect(Number(answers[0]![1]!.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('leaves to Hono every target it must not take, and those answer as before', async () => {
    const gw = await start(undefined, true);
    for (const path of ['j', 'murmur/c', '__ds/x'])
      await send(gw, 'PUT', `${PREFIX}${path}`, [...W, ...JSON_TYPE]);
    const before = gw.gateway.directServed();
    const notTaken: [string, string[], string?][] = [
      [`${PREFIX}j?x=1`, [...W, ...JSON_TYPE], '{"query":1}'],
      [`${PREFIX}%6a`, [...W, ...JSON_TYPE], '{"escaped":1}'],
      [`${PREFIX}a/../j`, [...W, ...JSON_TYPE], '{"dots":1}'],
      [`${PREFIX}a/./j`, [...W, ...JSON_TYPE], '{"dot":1}'],
      [`${PREFIX}j/`, [...W, ...JSON_TYPE], '{"trailing":1}'],
      [`${PREFIX}__ds/x`, [...W, ...JSON_TYPE], '{"reserved":1}'],
      [`${PREFIX}murmur/c`, [...W, ...JSON_TYPE], '{"capsule":1}'],
      [`${PREFIX}j`, [...W, ...JSON_TYPE, 'transfer-encoding', 'chunked'], '{"chunked":1}'],
      [`${PREFIX}j`, [...W, ...JSON_TYPE, 'host', 'Upper.Case'], '{"host":1}'],
    ];
    const statuses: number[] = [];
    for (const [path, headers, body] of notTaken)
      statuses.push((await send(gw, 'POST', path, headers, body)).status);
    expect(gw.gateway.directServed()).toBe(before);
    expect(statuses).toEqual([204, 204, 404, 404, 404, 501, 403, 204, 204]);
    // Taken again once plain.
    expect((await send(gw, 'POST', `${PREFIX}j`, [...W, ...JSON_TYPE], '{"plain":1}')).status).toBe(204);
    expect(gw.gateway.directServed()).toBe(before + 1);
  });
});
