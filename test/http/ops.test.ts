import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { DEMO_CORS_ORIGINS } from '../../src/process.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { redisServerAvailable } from '../support/redis-server.js';
import { scaled } from '../support/deadlines.js';

const requireRedis = process.env.REQUIRE_REDIS === '1';
const haveRedis = redisServerAvailable();

/** Poll a condition that is only observable over HTTP (no event to wait on from outside the process). */
const eventually = async <T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> => {
  const deadline = Date.now() + scaled(timeoutMs);
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
};

describe('operations routes', () => {
  let sim: SimulatedCapsule | null = null;
  let gw: TestGateway | null = null;
  let redis: RedisServer | null = null;

  afterEach(async () => {
    await gw?.close();
    await sim?.stop();
    await redis?.stop();
    gw = null;
    sim = null;
    redis = null;
  });

  for (const store of ['memory', 'redis'] as const) {
    it(`counts frames-possibly-missing facts per capsule in /capsules (${store})`, async () => {
      if (store === 'redis' && !redisServerAvailable()) return;
      sim = await startSimulator();
      if (store === 'redis') redis = await startRedisServer();
      gw = await startTestGateway({
        capsules: { alpha: sim.url },
        ...(redis ? { redisUrl: redis.url } : {}),
      });
      // First contact writes a cold-attach fact; a capsule restart writes capsule-restarted.
      await sim.submit('before').done;
      await sim.restart();
      await sim.submit('after').done;
      const facts = async (): Promise<number> => {
        const { records } = await gw!.core.read('alpha', 0, 1000);
        return records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing').length;
      };
      let expected = 0;
      for (let i = 0; i < 200 && expected < 2; i++) {
        expected = await facts();
        if (expected < 2) await gw.core.waitAfter('alpha', (await gw.core.position('alpha')).head, 1, 200);
      }
      expect(expected).toBeGreaterThanOrEqual(2);
      const body = (await (await fetch(`${gw.baseUrl}/capsules`)).json()) as {
        capsules: { id: string; frames_possibly_missing: number }[];
      };
      expect(body.capsules.find((c) => c.id === 'alpha')?.frames_possibly_missing).toBe(await facts());
    });
  }

  it('leaves out a capsule removed while /capsules was being answered (no 500)', async () => {
    sim = await startSimulator();
    gw = await startTestGateway({ capsules: { alpha: sim.url, beta: sim.url } });
    // The admin API or discovery removed beta between the list and its status: the race, made certain.
    const core = gw.core as { status: (id: string) => Promise<unknown> };
    const status = core.status.bind(gw.core);
    core.status = (id) =>
      id === 'beta'
        ? Promise.reject(new GatewayError('capsule_not_found', 'unknown capsule "beta"'))
        : status(id);
    const res = await fetch(`${gw.baseUrl}/capsules`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { capsules: { id: string }[] };
    expect(body.capsules.map((c) => c.id)).toEqual(['alpha']);
  });

  it('serves healthz, readyz, capsules and metrics', async () => {
    sim = await startSimulator();
    gw = await startTestGateway({ capsules: { alpha: sim.url } });
    expect(await (await fetch(`${gw.baseUrl}/healthz`)).json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${gw.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });

    const task = sim.submit('hello ops');
    await task.done;
    const capsule = await eventually(async () => {
      const body = (await (await fetch(`${gw!.baseUrl}/capsules`)).json()) as {
        capsules: Record<string, unknown>[];
      };
      const c = body.capsules[0];
      // Offsets start at the log's time floor, not 1: count frames from the first retained one.
      const logged = c ? (c.head_offset as number) - (c.first_offset as number) + 1 : 0;
      return c && c.upstream === 'connected' && logged > 3 ? c : undefined;
    }, 'the capsule to be connected with frames logged');
    expect(capsule).toMatchObject({
      id: 'alpha',
      url: sim.url,
      upstream: 'connected',
      reconnects: 0,
      conversation_mode: 'stateless',
      // The line and session its agent card declares.
      release: 'spec',
      session_id: sim.sessionId,
    });
    expect(capsule.first_offset as number).toBeGreaterThan(0);
    expect(typeof capsule.epoch).toBe('number');
    expect(typeof capsule.last_frame_at).toBe('string');

    const metrics = await fetch(`${gw.baseUrl}/metrics`);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    const text = await metrics.text();
    expect(text).toMatch(/murmur_gateway_log_head_offset\{capsule="alpha"\} \d+/);
    expect(text).toContain('murmur_gateway_upstream_connected{capsule="alpha"} 1');
    expect(text).toContain(
      `murmur_gateway_upstream_release_info{capsule="alpha",release="spec",session="${sim.sessionId}"} 1`,
    );
    expect(text).toMatch(/murmur_gateway_log_batches [1-9]/);
    expect(text).toContain('murmur_gateway_log_dropped_frames 0');
  });

  it('counts open downstream connections per capsule and surface', async () => {
    sim = await startSimulator();
    gw = await startTestGateway({ capsules: { alpha: sim.url } });
    const ac = new AbortController();
    const res = await fetch(`${gw.baseUrl}/murmur/alpha/events`, { signal: ac.signal });
    expect(res.status).toBe(200);
    const c = await eventually(async () => {
      const body = (await (await fetch(`${gw!.baseUrl}/capsules`)).json()) as {
        capsules: { connections: Record<string, number> }[];
      };
      return body.capsules[0]?.connections.murmur === 1 ? body.capsules[0] : undefined;
    }, 'one murmur connection');
    expect(c.connections).toEqual({ murmur: 1 });
    ac.abort();
    await eventually(async () => {
      const body = (await (await fetch(`${gw!.baseUrl}/capsules`)).json()) as {
        capsules: { connections: Record<string, number> }[];
      };
      return body.capsules[0]?.connections.murmur === 0 ? true : undefined;
    }, 'the connection to be released');
  });

  it('answers unknown routes with a JSON 404', async () => {
    sim = await startSimulator();
    gw = await startTestGateway({ capsules: { alpha: sim.url } });
    const res = await fetch(`${gw.baseUrl}/nowhere`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { code: 'not_found', message: 'no route for GET /nowhere' } });
  });

  it.skipIf(!haveRedis && !requireRedis)(
    'readyz is 503 while Redis is unreachable, 200 again after',
    async () => {
      redis = await startRedisServer();
      sim = await startSimulator();
      gw = await startTestGateway({ capsules: { alpha: sim.url }, redisUrl: redis.url });
      expect((await fetch(`${gw.baseUrl}/readyz`)).status).toBe(200);
      await redis.stop();
      const down = await eventually(async () => {
        const res = await fetch(`${gw!.baseUrl}/readyz`);
        return res.status === 503 ? res : undefined;
      }, 'readyz 503');
      expect(await down.json()).toEqual({ status: 'store_unreachable' });
      await redis.start();
      await eventually(
        async () => ((await fetch(`${gw!.baseUrl}/readyz`)).status === 200 ? true : undefined),
        'readyz 200',
      );
    },
  );

  it.skipIf(!haveRedis && !requireRedis)(
    'store out of reach: a live SSE reader is ended, a long-poll is 503 with Retry-After, /capsules degraded (never 500); all serve again after',
    async () => {
      redis = await startRedisServer();
      sim = await startSimulator();
      gw = await startTestGateway({ capsules: { alpha: sim.url }, redisUrl: redis.url });
      const head = (
        (await (await fetch(`${gw.baseUrl}/capsules`)).json()) as { capsules: { head_offset: number }[] }
      ).capsules[0]!.head_offset;
      const reader = await fetch(`${gw.baseUrl}/murmur/alpha/events`);
      expect(reader.status).toBe(200);
      const body = reader.body!.getReader();
      await body.read(); // the connection-ack
      // Frozen: no RST, no FIN, no answer (as behind a partition).
      redis.pause();
      // The reader's stream ends (the murmur wire's retry signal): it resumes on another replica.
      for (;;) if ((await body.read()).done) break;
      const poll = await fetch(`${gw.baseUrl}/murmur/alpha/poll?after=${head}&wait=1`);
      expect(poll.status).toBe(503);
      expect(poll.headers.get('retry-after')).toBe('1');
      expect(await poll.json()).toEqual({
        error: { code: 'store_unavailable', message: 'log store unavailable' },
      });
      const capsules = await fetch(`${gw.baseUrl}/capsules`);
      expect(capsules.status).toBe(200);
      const view = (await capsules.json()) as { store: string; capsules: Record<string, unknown>[] };
      expect(view.store).toBe('unreachable');
      expect(view.capsules[0]).toMatchObject({
        id: 'alpha',
        head_offset: null,
        frames_possibly_missing: null,
      });
      expect((await fetch(`${gw.baseUrl}/metrics`)).status).toBe(200);
      redis.resume();
      await eventually(async () => {
        const res = await fetch(`${gw!.baseUrl}/murmur/alpha/poll?after=${head}&wait=0`);
        return res.status === 200 ? true : undefined;
      }, 'long-poll 200 again');
      const again = (await (await fetch(`${gw.baseUrl}/capsules`)).json()) as { store: string };
      expect(again.store).toBe('ok');
    },
  );

  it.skipIf(!haveRedis && !requireRedis)(
    'readyz is 503 when the gateway starts before Redis, 200 once Redis answers',
    async () => {
      // Reserve a port, start the gateway against it with nothing listening, then bring Redis up there.
      const probe = await startRedisServer();
      const port = probe.port;
      await probe.stop();
      sim = await startSimulator();
      gw = await startTestGateway({ capsules: { alpha: sim.url }, redisUrl: `redis://127.0.0.1:${port}` });
      const down = await fetch(`${gw.baseUrl}/readyz`);
      expect(down.status).toBe(503);
      expect(await down.json()).toEqual({ status: 'store_unreachable' });
      redis = await startRedisServer(port);
      await eventually(
        async () => ((await fetch(`${gw!.baseUrl}/readyz`)).status === 200 ? true : undefined),
        'readyz 200',
      );
    },
  );

  it('applies CORS for configured origins only, exposing the coordination headers', async () => {
    sim = await startSimulator();
    gw = await startTestGateway({
      capsules: { alpha: sim.url },
      config: { corsOrigins: ['https://app.example'] },
    });
    const ok = await fetch(`${gw.baseUrl}/murmur/alpha/poll?after=0`, {
      headers: { Origin: 'https://app.example' },
    });
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(ok.headers.get('access-control-expose-headers')).toContain('Stream-Next-Offset');
    const pre = await fetch(`${gw.baseUrl}/flue/alpha/c1`, {
      method: 'OPTIONS',
      headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST' },
    });
    expect(pre.status).toBe(204);
    const other = await fetch(`${gw.baseUrl}/murmur/alpha/poll?after=0`, {
      headers: { Origin: 'https://evil.example' },
    });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers a preflight without CORS origins 204 naming the headers, and allows no origin', async () => {
    gw = await startTestGateway({ capsules: {} });
    const pre = await fetch(`${gw.baseUrl}/v1/stream/some/stream`, {
      method: 'OPTIONS',
      headers: {
        Origin: 'https://example.com',
        'Access-Control-Request-Method': 'GET',
        'Access-Control-Request-Headers': 'if-none-match',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('if-none-match');
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    // An OPTIONS that is no preflight is the route's own answer, as before.
    const plain = await fetch(`${gw.baseUrl}/v1/stream/some/stream`, { method: 'OPTIONS' });
    expect(plain.status).not.toBe(204);
  });

  it("the demo's origins: a page on this machine, any port, may read; a page from anywhere else may not", async () => {
    sim = await startSimulator();
    gw = await startTestGateway({ capsules: { alpha: sim.url }, config: { corsOrigins: DEMO_CORS_ORIGINS } });
    const allowed = async (origin: string): Promise<string | null> =>
      (await fetch(`${gw!.baseUrl}/client/murmur-gateway.js`, { headers: { Origin: origin } })).headers.get(
        'access-control-allow-origin',
      );
    for (const origin of [
      'http://localhost:8000',
      'http://127.0.0.1:5173',
      'http://[::1]:3000',
      'http://localhost',
    ])
      expect(await allowed(origin), origin).toBe(origin);
    for (const origin of [
      'https://evil.example',
      'http://localhost.evil.example:8000',
      'http://127.0.0.1.nip.io:80',
      'http://localhost:8000.evil.example',
      'https://localhost:8000',
      'null',
    ])
      expect(await allowed(origin), origin).toBeNull();
  });
});
