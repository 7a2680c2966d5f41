/**
 * Abuse bounds on real gateways: rate limits, open-request caps and submissions per owner
 * shared by two replicas on one Redis; each surface's 429 with Retry-After; trust proxy. Each test
 * uses its own client address through X-Forwarded-For (trustProxy: 1), so tests sharing the Redis
 * never share a bucket.
 */
import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { GatewayConfigInput } from '../../src/config/schema.js';
import { startSimulator } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';

const redisUrl = testRedisUrl();
const fresh = (): string => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;

const twoReplicas = async (
  limits: NonNullable<GatewayConfigInput['limits']>,
): Promise<{ a: TestGateway; b: TestGateway; capsule: string }> => {
  const sim = await startSimulator();
  stopAfterTest(sim);
  const capsule = uniqueCapsule('abuse');
  const opts = {
    capsules: { [capsule]: sim.url },
    redisUrl,
    extra: { limits, server: { trustProxy: 1 as const } },
  };
  const a = await startTestGateway(opts);
  const b = await startTestGateway(opts);
  stopAfterTest(a);
  stopAfterTest(b);
  return { a, b, capsule };
};

describe.skipIf(!redisUrl)('abuse bounds across two replicas on one Redis', () => {
  it('drains one client address bucket across both replicas, then answers 429 with Retry-After', async () => {
    const { a, b } = await twoReplicas({ ip: { requestsPerSecond: 0.01, burst: 4 } });
    const ip = fresh();
    const statuses: number[] = [];
    for (const gw of [a, b, a, b, a, b]) {
      const res = await fetch(`${gw.baseUrl}/capsules`, { headers: { 'x-forwarded-for': ip } });
      statuses.push(res.status);
      if (res.status === 429) {
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(await res.json()).toEqual({
          error: { code: 'rate_limited', message: 'too many requests, retry later' },
        });
      } else await res.body?.cancel();
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    // Another client address is not affected; health is never limited.
    expect((await fetch(`${a.baseUrl}/capsules`, { headers: { 'x-forwarded-for': fresh() } })).status).toBe(
      200,
    );
    expect((await fetch(`${b.baseUrl}/healthz`, { headers: { 'x-forwarded-for': ip } })).status).toBe(200);
  });

  it('answers 429 in each surface grammar', async () => {
    const { a, b, capsule } = await twoReplicas({ ip: { requestsPerSecond: 0.01, burst: 1 } });
    const ip = fresh();
    const h = { 'x-forwarded-for': ip };
    expect((await fetch(`${b.baseUrl}/capsules`, { headers: h })).status).toBe(200);
    const call = async (path: string, init: RequestInit = {}): Promise<Response> => {
      const res = await fetch(`${a.baseUrl}${path}`, { ...init, headers: { ...h, ...init.headers } });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      return res;
    };
    expect(await (await call(`/murmur/${capsule}/poll`)).json()).toEqual({
      error: { code: 'rate_limited', message: 'too many requests, retry later' },
    });
    const rpc = await call(`/murmur/${capsule}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'stream/watch' }),
    });
    expect(await rpc.json()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32000, message: 'Rate limited' },
    });
    expect(await (await call(`/murmur/${capsule}/events`)).text()).toBe('');
    const beeos = (await (await call(`/api/v1/agents/${capsule}/tasks/t1`)).json()) as {
      success: boolean;
      error: { type: string; code: string; request_id: string };
    };
    expect(beeos.success).toBe(false);
    expect(beeos.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
    expect(beeos.error.request_id).toMatch(/\S/);
    const flue = await call(`/flue/${capsule}/conv-1`);
    expect(await flue.json()).toEqual({
      error: { type: 'rate_limited', message: 'too many requests, retry later', details: '' },
    });
    expect(flue.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('caps open streams per client address across both replicas, and frees a slot when a stream ends', async () => {
    const { a, b, capsule } = await twoReplicas({ streamsPerIp: 2 });
    const ip = fresh();
    const open = async (gw: TestGateway): Promise<{ res: Response; abort: AbortController }> => {
      const abort = new AbortController();
      const res = await fetch(`${gw.baseUrl}/murmur/${capsule}/events`, {
        headers: { 'x-forwarded-for': ip },
        signal: abort.signal,
      });
      return { res, abort };
    };
    const s1 = await open(a);
    const s2 = await open(b);
    expect([s1.res.status, s2.res.status]).toEqual([200, 200]);
    const third = await open(a);
    expect(third.res.status).toBe(429);
    expect(third.res.headers.get('retry-after')).toBe('5');
    // Another address still gets a stream.
    const other = await fetch(`${b.baseUrl}/murmur/${capsule}/events`, {
      headers: { 'x-forwarded-for': fresh() },
      signal: AbortSignal.timeout(60_000),
    });
    expect(other.status).toBe(200);
    await other.body?.cancel();
    // Ending a stream on replica B frees its slot for a stream on replica A.
    s2.abort.abort();
    let again = await open(a);
    while (again.res.status === 429) {
      await new Promise((r) => setTimeout(r, 20));
      again = await open(a);
    }
    expect(again.res.status).toBe(200);
    s1.abort.abort();
    again.abort.abort();
  });

  it('caps submissions per owner per minute across both replicas', async () => {
    const { a, b, capsule } = await twoReplicas({ submissionsPerMinute: 2 });
    const ip = fresh();
    const post = (gw: TestGateway): Promise<Response> =>
      fetch(`${gw.baseUrl}/murmur/${capsule}/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 'none' } }),
      });
    const statuses: number[] = [];
    for (const gw of [a, b, a]) {
      const res = await post(gw);
      statuses.push(res.status);
      await res.body?.cancel();
    }
    expect(statuses).toEqual([200, 200, 429]);
    // Reads are not submissions.
    expect((await fetch(`${b.baseUrl}/murmur/${capsule}/poll?wait=0`)).status).toBe(200);
  });
});
