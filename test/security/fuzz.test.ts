/**
 * Bad input never reaches a 5xx: generated requests (every method, known and wrong, ×
 * every route with generated segments, malformed percent-escapes, huge and negative query numbers,
 * invalid and oversized JSON, unknown fields, Last-Event-ID; the Durable Streams routes, capsule and
 * general, with their headers: dot segments, control characters, numbers past what a store holds,
 * impossible dates, empty Stream-Seq, fork sources) against a running gateway with a
 * simulator capsule, twice: on the embedded store with no auth (loopback: every caller is `open`),
 * and on the test Redis with API keys, where requests carry no, a wrong, or a valid key of one of
 * several scopes, so authenticated paths are fuzzed too.
 *
 * Asserts: no 5xx; a request answered 4xx wrote nothing to the log (no submission record appeared
 * while it ran: the capsule's own frames and the follow-ups of earlier accepted submissions, a BeeOS
 * `outcome` or a Flue `settlement`, may land at any time, so the head alone cannot tell); the
 * gateway still answers /healthz and the capsule's log afterwards. Bounded: 300 runs per gateway,
 * long-polls held 200 ms. `FUZZ_SEED` replays a run (the seed is printed on failure).
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/record.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';

const BODY_LIMIT = 4096;
const sha = (key: string): string => createHash('sha256').update(key).digest('hex');
/** Keys of the keyed run: none has `admin` (the fuzz must not delete its own capsule). */
const KEYS = {
  submit: 'fuzz-submit-key-0123456789abcdef',
  operator: 'fuzz-operator-key-0123456789abcd',
  ops: 'fuzz-ops-key-0123456789abcdef012',
  other: 'fuzz-other-capsule-key-012345678',
  streams: 'fuzz-streams-key-0123456789abcde',
} as const;

/** The capsule's connection facts land first: wait until the log is quiet. */
const settle = async (gw: TestGateway, capsule: string): Promise<void> => {
  let after = 0;
  let connected = false;
  for (;;) {
    const { records } = await gw.core.waitAfter(capsule, after, 100, 300);
    if (records.length === 0 && connected) return;
    for (const r of records) {
      after = r.offset;
      if (r.kind === 'fact' && r.fact === 'upstream-connected') connected = true;
    }
  }
};

/** A submission written by a request itself (not a follow-up of an earlier accepted one). */
const ownSubmission = (r: LogRecord): boolean => {
  if (r.kind !== 'submission') return false;
  const meta = r.meta as { beeos?: { op?: string }; flue?: string } | undefined;
  return meta?.beeos?.op !== 'outcome' && meta?.flue !== 'settlement';
};

const requestArb = (cap: string, keyed: boolean) => {
  const segment = fc.oneof(
    fc.constantFrom(cap, 'nope', '%E0', '%', '%zz', '..', '%2F', `${cap}%00`, 'a'.repeat(300), ''),
    fc.stringMatching(/^[A-Za-z0-9._~%-]{0,12}$/),
  );
  const capsuleSeg = fc.oneof({ weight: 3, arbitrary: fc.constant(cap) }, { weight: 1, arbitrary: segment });
  const route = fc.oneof(
    fc
      .tuple(capsuleSeg, fc.constantFrom('', '/', '/events', '/poll', '/records', '/x', '/poll/'))
      .map(([c, r]) => `/murmur/${c}${r}`),
    fc
      .tuple(capsuleSeg, fc.constantFrom('invoke', 'tasks', 'conversations', 'invoke/', 'nope'))
      .map(([c, k]) => `/api/v1/agents/${c}/${k}`),
    fc
      .tuple(
        capsuleSeg,
        fc.constantFrom('tasks', 'conversations'),
        segment,
        fc.constantFrom('', '/events', '/messages', '/cancel', '/x'),
      )
      .map(([c, k, id, r]) => `/api/v1/agents/${c}/${k}/${id}${r}`),
    fc
      .tuple(capsuleSeg, segment, fc.constantFrom('', '/abort', '/attachments/a1', '/x/y'))
      .map(([c, id, r]) => `/flue/${c}/${id}${r}`),
    // Durable Streams: the capsule streams and the general ones, with dot segments in every
    // spelling, control characters and bad escapes (fetch resolves a literal `..` itself).
    fc
      .tuple(capsuleSeg, fc.constantFrom('', '/', '/x', '/%2e%2e'))
      .map(([c, r]) => `/v1/stream/murmur/${c}${r}`),
    // The general streams' routes weigh as much as all the others: they take every method and header.
    {
      weight: 6,
      arbitrary: fc
        .tuple(
          fc.constantFrom('fz/', 'fz/', 'fz/a/', 'team/', '', '__ds/', 'murmur/'),
          segment,
          fc.constantFrom(
            '',
            '/x',
            '/%2e%2e/y',
            '/%2E/z',
            '/.%2e',
            '%00',
            '%0A',
            '%1B',
            '%7F',
            '%FF',
            '%C3%28',
          ),
        )
        .map(([p, seg, r]) => `/v1/stream/${p}${seg}${r}`),
    },
    fc.constantFrom(
      '/capsules',
      '/metrics',
      '/readyz',
      '/healthz',
      '/admin/capsules',
      `/admin/capsules/${cap}`,
      '/auth/tickets',
      '/dashboard',
      '/client/murmur-gateway.js',
      '/%E0',
      '/',
    ),
  );
  // Numbers every surface parses: huge, negative, fractional, exponent, hex, padded, empty.
  const number = fc.oneof(
    fc.constantFrom(
      '-1',
      '-99999999999',
      '99999999999',
      '0',
      '1.5',
      '1e309',
      '1e3',
      '0x10',
      'NaN',
      'Infinity',
      '%20',
      '+1',
      '99999999999999999999999',
      '9007199254740993',
      '',
    ),
    fc.integer().map(String),
    fc.nat().map(String),
  );
  const flueOffset = fc.constantFrom(
    '-1',
    'now',
    '-5',
    '0000000000000000_0000000000000000',
    '9999999999999999_9999999999999999',
    '1_1',
    'abc',
  );
  const query = fc.oneof(
    fc.constant(''),
    fc
      .array(
        fc.oneof(
          fc.tuple(
            fc.constantFrom('after', 'wait', 'limit', 'since', 'offset', 'tail', 'lastEventId', 'cursor'),
            number,
          ),
          fc.tuple(fc.constant('offset'), flueOffset),
          fc.tuple(
            fc.constantFrom('view', 'live', 'include_deltas', 'ticket', '%E0'),
            fc.constantFrom('history', 'updates', 'sse', 'long-poll', 'true', 'nope', '%E0', ''),
          ),
        ),
        { maxLength: 4 },
      )
      .map((kv) => `?${kv.map(([k, v]) => `${k}=${v}`).join('&')}`),
  );
  const oversized = fc
    .integer({ min: BODY_LIMIT + 1, max: BODY_LIMIT * 8 })
    .chain((n) =>
      fc.constantFrom(
        'x'.repeat(n),
        JSON.stringify({ message: 'x'.repeat(n) }),
        JSON.stringify({ kind: 'user', body: 'x'.repeat(n) }),
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/stream', params: { pad: 'x'.repeat(n) } }),
      ),
    );
  const invalidJson = fc.constantFrom(
    '{',
    '{"message":',
    '{"message":"x",}',
    "{'message':'x'}",
    '\ufeff{"message":"x"}',
    '{"message":"x"}garbage',
    '{"message":NaN}',
    '\u0000',
    '[1,2',
    '['.repeat(3000),
    '{"a":'.repeat(500),
    '"\\ud800"',
    '{"message":"\\u00"}',
  );
  const unknownFields = fc
    .record({
      extra: fc.anything({ maxDepth: 1 }),
      context_id: fc.oneof(fc.constantFrom('ctx-1', '', '../x', 'a'.repeat(200)), fc.nat()),
    })
    .chain((extra) =>
      fc.constantFrom(
        { message: 'fuzz', ...extra, idempotency_key: 'k' },
        { message: { text: 'fuzz', unknown: true }, ...extra },
        { kind: 'user', body: 'fuzz', unknown: extra.extra },
        { kind: 'nope', ...extra },
        { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 'x' }, ...extra },
        { id: 'x', url: 'http://127.0.0.1:1/', unknown: 1 },
      ),
    )
    .map((v) => JSON.stringify(v));
  const body = fc.oneof(
    fc.constant(undefined),
    fc.string({ maxLength: 50 }),
    fc.constantFrom('[]', 'null', '{"jsonrpc":"2.0"}', '{"message":"' + 'x'.repeat(2000) + '"}'),
    invalidJson,
    oversized,
    unknownFields,
    fc
      .record({
        jsonrpc: fc.constant('2.0'),
        id: fc.oneof(fc.nat(), fc.string({ maxLength: 5 }), fc.constant(null)),
        method: fc.constantFrom('tasks/get', 'tasks/cancel', 'nope', 'stream/watch'),
        params: fc.anything({ maxDepth: 2 }),
      })
      .map((r) => JSON.stringify(r)),
    fc.anything({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? 'undefined'),
  );
  const credential = keyed
    ? fc.constantFrom<string | undefined>(
        undefined,
        'Bearer wrong-key',
        'Bearer ',
        'Basic Zm9vOmJhcg==',
        `Bearer ${KEYS.submit}`,
        `Bearer ${KEYS.submit}`,
        `Bearer ${KEYS.operator}`,
        `Bearer ${KEYS.operator}`,
        `Bearer ${KEYS.ops}`,
        `Bearer ${KEYS.other}`,
        `Bearer ${KEYS.streams}`,
        `Bearer ${KEYS.streams}`,
      )
    : fc.constantFrom<string | undefined>(undefined, 'Bearer wrong-key');
  // The general streams' request headers: numbers beyond what a store holds, impossible dates,
  // empty values, fork sources in several spellings.
  const streamHeaderValues = {
    'stream-ttl': fc.oneof(number, fc.constantFrom('99999999999', '3155760000', '3155760001', '01', '1.5')),
    'stream-expires-at': fc.constantFrom(
      '2099-02-30T00:00:00Z',
      '2099-01-01T00:00:00Z',
      '9999-12-31T23:59:59Z',
      '0000-01-01T00:00:00Z',
      '2099-01-01T23:59:60Z',
      'tomorrow',
      '',
    ),
    'stream-seq': fc.constantFrom('', '5', 'a', '\u00ff'),
    'stream-closed': fc.constantFrom('true', 'false', ''),
    'producer-id': fc.constantFrom('p', '', ' '),
    'producer-epoch': number,
    'producer-seq': number,
    'stream-forked-from': fc.constantFrom(
      '/v1/stream/fz/a',
      '/v1/stream/fz/%2e%2e/fz/a',
      'http://127.0.0.1:1/v1/stream/fz/a%20b',
      '/v1/stream/fz/a%00',
      '/v1/stream/murmur/x',
      'garbage',
      '',
    ),
    'stream-fork-offset': flueOffset,
    'stream-fork-sub-offset': number,
  };
  // Mostly one or two of them at a time: a request carrying many is refused for the first bad one.
  const streamHeaders = fc
    .array(
      fc.oneof(
        ...Object.entries(streamHeaderValues).map(([name, value]) =>
          (value as fc.Arbitrary<string>).map((v) => [name, v] as const),
        ),
      ),
      { maxLength: 2 },
    )
    .map((pairs) => Object.fromEntries(pairs) as Record<string, string>);
  return fc.record({
    method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'PATCH', 'OPTIONS', 'PROPFIND'),
    streamHeaders,
    path: route,
    query,
    body,
    /** Send the body as a chunked stream (no Content-Length: the limit is counted as it arrives). */
    chunked: fc.boolean(),
    contentType: fc.constantFrom(
      'application/json',
      'text/plain',
      'application/json; charset=utf-8',
      'multipart/form-data',
      'application/octet-stream',
      '',
    ),
    lastEventId: fc.option(fc.constantFrom('-1', 'abc', '1', '99999999999999999999999999'), {
      nil: undefined,
    }),
    authorization: credential,
  });
};

interface Setup {
  name: string;
  redis: boolean;
  keyed: boolean;
}

const SETUPS: Setup[] = [
  { name: 'embedded store, no auth (loopback)', redis: false, keyed: false },
  { name: 'Redis, API keys (valid, wrong and missing credentials)', redis: true, keyed: true },
];

describe.each(SETUPS)('fuzz: bad input never reaches a 5xx — $name', (setup) => {
  const redisUrl = setup.redis ? testRedisUrl() : undefined;
  const skip = setup.redis && !redisUrl;
  const cap = setup.redis ? uniqueCapsule('fuzz') : 'cap';
  let sim: SimulatedCapsule;
  let gw: TestGateway;
  beforeAll(async () => {
    if (skip) return;
    sim = await startSimulator();
    gw = await startTestGateway({
      capsules: { [cap]: sim.url },
      ...(redisUrl ? { redisUrl } : {}),
      config: { longPollMaxMs: 200, heartbeatMs: 100, bodyLimitBytes: BODY_LIMIT },
      tuning: { streams: { keyPrefix: `test:ds:fuzz:${cap}` } },
      extra: {
        durableStreams: { writable: true, maxStreams: 100, maxBodyBytes: BODY_LIMIT },
        ...(setup.keyed
          ? {
              auth: {
                apiKeys: [
                  { sha256: sha(KEYS.submit), owner: 'alice' },
                  {
                    sha256: sha(KEYS.operator),
                    owner: 'operator',
                    scopes: ['submit', 'observe', 'control'],
                    capsules: [cap],
                  },
                  { sha256: sha(KEYS.ops), owner: 'ops', scopes: ['ops'] },
                  {
                    sha256: sha(KEYS.other),
                    owner: 'bob',
                    scopes: ['submit', 'observe'],
                    capsules: ['elsewhere'],
                  },
                  { sha256: sha(KEYS.streams), owner: 'streamer', scopes: ['write'], streams: ['fz/**'] },
                ],
              },
            }
          : {}),
      },
    });
    await settle(gw, cap);
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
  });

  it.skipIf(skip)(
    'answers generated requests without a 5xx, logs nothing for 4xx, stays healthy',
    async () => {
      const head = async (): Promise<number> => (await gw.core.position(cap)).head;
      await fc.assert(
        fc.asyncProperty(requestArb(cap, setup.keyed), async (r) => {
          const before = await head();
          const headers: Record<string, string> = { ...r.streamHeaders };
          if (r.contentType) headers['content-type'] = r.contentType;
          if (r.lastEventId !== undefined) headers['last-event-id'] = r.lastEventId;
          if (r.authorization !== undefined) headers.authorization = r.authorization;
          const withBody = r.body !== undefined && r.method !== 'GET' && r.method !== 'HEAD';
          const payload =
            withBody && r.chunked
              ? { body: new Blob([r.body!]).stream(), duplex: 'half' as const }
              : withBody
                ? { body: r.body }
                : {};
          const res = await fetch(`${gw.baseUrl}${r.path}${r.query}`, {
            method: r.method,
            headers,
            ...payload,
            signal: AbortSignal.timeout(10_000),
          } as RequestInit);
          // Streams answer 200 and stay open: their status is all this property needs.
          await res.body?.cancel().catch(() => undefined);
          const what = `${r.method} ${r.path}${r.query} (${r.authorization ?? 'no credential'})`;
          // The one documented 5xx: the reserved `__ds/` of the Durable Streams answers 501.
          const reserved = res.status === 501 && /^\/v1\/stream\/__ds(\/|$)/.test(r.path);
          if (!reserved) expect(res.status, what).toBeLessThan(500);
          if (res.status >= 400) {
            const { records } = await gw.core.read(cap, before, 1000);
            expect(records.filter(ownSubmission), `${what} wrote to the log`).toEqual([]);
          }
        }),
        { numRuns: 300, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 1e9) },
      );
      expect((await fetch(`${gw.baseUrl}/healthz`)).status).toBe(200);
      expect(await head()).toBeGreaterThan(0);
    },
  );
});
