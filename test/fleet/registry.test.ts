/**
 * The capsule registry shared in Redis (real redis-server, real HTTP): two gateways on one registry;
 * a capsule PUT on one is served by the other within seconds and ingested by one of them; DELETE
 * removes it from both. Waits are bounded polls of the public API, never fixed sleeps.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { until } from '../support/deadlines.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';

const redisUrl = testRedisUrl();
const TOKEN = 'adm_fleet_token';
const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface CapsuleRow {
  id: string;
  upstream: string;
  owner: string | null;
}
const capsulesOf = async (gw: TestGateway): Promise<CapsuleRow[]> =>
  ((await (await fetch(`${gw.baseUrl}/capsules`)).json()) as { capsules: CapsuleRow[] }).capsules;

describe.skipIf(!redisUrl)('capsule registry in Redis, two replicas', () => {
  let sim: SimulatedCapsule;
  let a: TestGateway;
  let b: TestGateway;
  const registryKey = `mg:fleet:capsules:test-${randomUUID()}`;

  beforeAll(async () => {
    sim = await startSimulator({ heartbeatMs: 200 });
    const start = (seed: Record<string, string>) =>
      startTestGateway({
        capsules: seed,
        redisUrl,
        extra: { auth: { adminTokens: [{ sha256: sha256Hex(TOKEN) }] } },
        // A long resync: a change must arrive by the notification, not by the safety net.
        tuning: { fleet: { registryKey, registryResyncMs: 60_000 } },
      });
    a = await start({});
    b = await start({});
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await sim?.stop();
  });

  it('PUT on one replica: the other serves it within seconds, one of them ingests it; DELETE removes it from both', async () => {
    const id = `live-${randomUUID().slice(0, 8)}`;
    const put = await fetch(`${a.baseUrl}/admin/capsules/${id}`, {
      method: 'PUT',
      headers: admin,
      body: JSON.stringify({ url: sim.url }),
    });
    expect(put.status).toBe(201);

    // The other replica lists it and answers its poll.
    await until(async () => ((await capsulesOf(b)).some((c) => c.id === id) ? true : undefined), 5_000);
    expect((await fetch(`${b.baseUrl}/murmur/${id}/poll?after=0`)).status).toBe(200);
    // b's admin API reads the same registry.
    expect(await (await fetch(`${b.baseUrl}/admin/capsules/${id}`, { headers: admin })).json()).toMatchObject(
      {
        id,
        url: sim.url,
        source: 'admin',
      },
    );

    // Some replica ingests it: its upstream connects, and a task's frames reach the log served by both.
    await until(async () => {
      const rows = [...(await capsulesOf(a)), ...(await capsulesOf(b))].filter((c) => c.id === id);
      return rows.some((c) => c.upstream === 'connected') ? true : undefined;
    }, 5_000);
    const task = sim.submit('hello fleet');
    await task.done;
    for (const gw of [a, b]) {
      await until(async () => {
        const poll = (await (await fetch(`${gw.baseUrl}/murmur/${id}/poll?after=0&limit=1000`)).json()) as {
          records: { kind: string; data?: string }[];
        };
        return poll.records.some((r) => r.kind === 'frame' && r.data?.includes(task.taskId))
          ? true
          : undefined;
      }, 5_000);
    }

    const del = await fetch(`${b.baseUrl}/admin/capsules/${id}`, { method: 'DELETE', headers: admin });
    expect(del.status).toBe(204);
    for (const gw of [a, b]) {
      await until(async () => ((await capsulesOf(gw)).some((c) => c.id === id) ? undefined : true), 5_000);
      expect((await fetch(`${gw.baseUrl}/murmur/${id}/poll?after=0`)).status).toBe(404);
    }
  });

  it('a replica started later sees what the admin API added before it started', async () => {
    const id = `early-${randomUUID().slice(0, 8)}`;
    const put = await fetch(`${a.baseUrl}/admin/capsules/${id}`, {
      method: 'PUT',
      headers: admin,
      body: JSON.stringify({ url: sim.url }),
    });
    expect(put.status).toBe(201);
    const c = await startTestGateway({ capsules: {}, redisUrl, tuning: { fleet: { registryKey } } });
    try {
      await until(async () => (c.core.hasCapsule(id) ? true : undefined), 5_000);
    } finally {
      await c.close();
      await fetch(`${a.baseUrl}/admin/capsules/${id}`, { method: 'DELETE', headers: admin });
    }
  });

  it('config seeds the registry at start (upsert) and admin-added entries persist', async () => {
    const seeded = `seeded-${randomUUID().slice(0, 8)}`;
    const c = await startTestGateway({
      capsules: { [seeded]: sim.url },
      redisUrl,
      tuning: { fleet: { registryKey } },
    });
    try {
      await until(
        async () => (a.core.hasCapsule(seeded) && b.core.hasCapsule(seeded) ? true : undefined),
        5_000,
      );
      expect(
        await (await fetch(`${a.baseUrl}/admin/capsules/${seeded}`, { headers: admin })).json(),
      ).toMatchObject({
        source: 'config',
      });
    } finally {
      await c.close();
      await fetch(`${a.baseUrl}/admin/capsules/${seeded}`, { method: 'DELETE', headers: admin });
    }
  });
});
