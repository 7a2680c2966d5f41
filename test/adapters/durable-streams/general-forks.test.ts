/**
 * The gateway's own answers around forks of general streams, on both stores, beyond what the
 * conformance suite checks: the exact error bodies of a soft-deleted stream and of a fork of one,
 * which source offsets a fork accepts (up to its fork point, not past it), the maxStreams bound
 * with soft-deleted streams, and base64 SSE of a binary fork.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { noRedis, STORE_CASES, urlFor } from '../../support/redis.js';

let gw: TestGateway | null = null;
afterEach(async () => {
  await gw?.close();
  gw = null;
});

const start = async (redisUrl: string | undefined): Promise<TestGateway> =>
  startTestGateway({
    capsules: {},
    ...(redisUrl ? { redisUrl } : {}),
    extra: { durableStreams: { writable: true, maxStreams: 2 } },
    tuning: { streams: { keyPrefix: `test:ds:${randomUUID()}` } },
  });

const text = { 'content-type': 'text/plain' };
const forkHeaders = (source: string, more: Record<string, string> = {}): Record<string, string> => ({
  ...text,
  'stream-forked-from': `/v1/stream/${source}`,
  ...more,
});

const stores = STORE_CASES;

describe.each(stores)('general stream forks (%s store)', (name, redisUrl) => {
  const run = async (): Promise<string> => {
    gw = await start(urlFor(name, redisUrl));
    return `${gw.baseUrl}/v1/stream`;
  };

  it.skipIf(noRedis(name, redisUrl))(
    'answer a soft-deleted stream 410 stream_gone and a fork of it 409',
    async () => {
      const base = await run();
      expect((await fetch(`${base}/src`, { method: 'PUT', headers: text, body: 'a' })).status).toBe(201);
      expect((await fetch(`${base}/fork`, { method: 'PUT', headers: forkHeaders('src') })).status).toBe(201);
      expect((await fetch(`${base}/src`, { method: 'DELETE' })).status).toBe(204);
      const gone = await fetch(`${base}/src?offset=-1`);
      expect(gone.status).toBe(410);
      expect(await gone.json()).toEqual({
        error: { code: 'stream_gone', message: 'the stream was deleted (its forks still read its messages)' },
      });
      const again = await fetch(`${base}/other`, { method: 'PUT', headers: forkHeaders('src') });
      expect(again.status).toBe(409);
      expect(await again.json()).toEqual({
        error: { code: 'source_gone', message: 'the source stream was deleted' },
      });
      // The soft-deleted source no longer counts: with maxStreams 2, one more stream fits.
      expect((await fetch(`${base}/third`, { method: 'PUT', headers: text })).status).toBe(201);
      expect((await fetch(`${base}/fourth`, { method: 'PUT', headers: text })).status).toBe(507);
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    "accept the source's offsets up to the fork point, and refuse one past it",
    async () => {
      const base = await run();
      const created = await fetch(`${base}/src`, { method: 'PUT', headers: text, body: 'a' });
      const point = created.headers.get('stream-next-offset')!;
      const past = (await fetch(`${base}/src`, { method: 'POST', headers: text, body: 'b' })).headers.get(
        'stream-next-offset',
      )!;
      const fork = await fetch(`${base}/fork`, {
        method: 'PUT',
        headers: forkHeaders('src', { 'stream-fork-offset': point }),
        body: 'F',
      });
      expect(fork.status).toBe(201);
      const forkTail = fork.headers.get('stream-next-offset')!;
      expect(forkTail > past).toBe(true);
      const resumed = await fetch(`${base}/fork?offset=${point}`);
      expect(await resumed.text()).toBe('F');
      expect(resumed.headers.get('stream-next-offset')).toBe(forkTail);
      const refused = await fetch(`${base}/fork?offset=${past}`);
      expect(refused.status).toBe(400);
      expect(await refused.json()).toEqual({
        error: { code: 'bad_request', message: 'offset of the source past the fork point' },
      });
    },
  );

  it.skipIf(noRedis(name, redisUrl))(
    'stream a binary fork over SSE as base64, inherited bytes first',
    async () => {
      const base = await run();
      const bin = { 'content-type': 'application/octet-stream' };
      await fetch(`${base}/src`, { method: 'PUT', headers: bin, body: new Uint8Array([0, 255]) });
      await fetch(`${base}/fork`, {
        method: 'PUT',
        headers: { 'stream-forked-from': '/v1/stream/src' },
        body: new Uint8Array([10]),
      });
      const ac = new AbortController();
      const res = await fetch(`${base}/fork?offset=-1&live=sse`, { signal: ac.signal });
      expect(res.headers.get('stream-sse-data-encoding')).toBe('base64');
      const reader = res.body!.getReader();
      let received = '';
      while (!received.includes('upToDate'))
        received += new TextDecoder().decode((await reader.read()).value);
      ac.abort();
      const data = /event: data\ndata: ?(.*)\n/.exec(received)![1]!;
      expect([...Buffer.from(data, 'base64')]).toEqual([0, 255, 10]);
    },
  );
});
