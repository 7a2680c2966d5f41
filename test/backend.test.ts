/**
 * The backend factory (src/backend.ts) is the one place that chooses Redis or memory: each set is
 * whole and working, and no other production file asks which store it has.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createBackend, type Backend } from '../src/backend.js';
import { configSchema } from '../src/config/schema.js';
import { createLogger } from '../src/logger.js';
import { withTimeout } from '../src/timeouts.js';
import { testRedisUrl, uniqueCapsule } from './support/redis.js';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const url = testRedisUrl();
const skip = url === undefined && process.env.REQUIRE_REDIS !== '1';
const logger = createLogger('silent');
const configOf = (redis: string | null) =>
  configSchema.parse({
    store: { redis },
    fleet: { replicaId: `backend-test-${process.pid}` },
    logLevel: 'silent',
  });

const opened: Backend[] = [];
afterEach(async () => {
  for (const b of opened.splice(0)) {
    b.close();
    await b.store.close();
  }
});

const tsFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });

describe('backend factory', () => {
  it('is the only production file that asks for, or makes, a store-specific part', () => {
    const choice =
      /instanceof (Redis|Memory)Store\b|new (Redis|Memory)(Store|StreamStore|SubscriptionStore|CapsuleRegistry|LimitCounters)\(|new (FleetOwnership|LocalOwnership|AdmissionBus|RedisClaims)\(/;
    const choosing = [...tsFiles(join(root, 'src')), ...tsFiles(join(root, 'adapters'))]
      .filter((f) => choice.test(readFileSync(f, 'utf8')))
      .map((f) => relative(root, f));
    expect(choosing).toEqual(['src/backend.ts']);
  });

  it('without Redis: the embedded set, one process, unfenced, always reachable', async () => {
    const backend = createBackend(configOf(null), logger);
    opened.push(backend);
    expect(backend.fenced).toBe(false);
    expect(backend.storeHealth()).toBeNull();
    expect(backend.admissionBus()).toBeNull();
    expect(await backend.store.ping()).toBe(true);
    const claims = backend.claims();
    const held = await claims.claimOnce('cap', 'key', 60_000);
    expect(held).not.toBeNull();
    expect(await claims.claimOnce('cap', 'key', 60_000)).toBeNull();
    const registry = backend.registry();
    await registry.put('cap', { url: 'http://127.0.0.1:1/', source: 'admin', updatedAt: 1 });
    expect([...(await registry.list()).keys()]).toEqual(['cap']);
    await registry.close();
  });

  it.skipIf(skip)(
    'with Redis: the shared set, fenced, probed, and admissions heard across replicas',
    async () => {
      const prefix = `mg-backend-${uniqueCapsule()}`;
      const keys = { fleetPrefix: prefix, streamsPrefix: `${prefix}:ds`, registryKey: `${prefix}:capsules` };
      const one = createBackend(configOf(url!), logger, keys);
      const two = createBackend(configOf(url!), logger, keys);
      opened.push(one, two);
      expect(one.fenced).toBe(true);
      expect(await one.store.ping()).toBe(true);
      const health = one.storeHealth();
      expect(health?.reachable).toBe(true);
      health?.close();

      // Once-only across replicas: the second replica's claim of the same key is refused.
      const capsule = uniqueCapsule();
      expect(await one.claims().claimOnce(capsule, 'key', 60_000)).not.toBeNull();
      expect(await two.claims().claimOnce(capsule, 'key', 60_000)).toBeNull();

      // An admission announced by one replica wakes the other (the one that made it hears nothing).
      const sender = one.admissionBus()!;
      const receiver = configOf(url!);
      const other = createBackend(
        { ...receiver, fleet: { ...receiver.fleet, replicaId: `${receiver.fleet.replicaId}-b` } },
        logger,
        keys,
      );
      opened.push(other);
      const bus = other.admissionBus()!;
      const heard = new Promise<[string, number]>((r) => bus.onAdmitted((c, o) => r([c, o])));
      // The receiver subscribes once its own connection is ready: announce until it hears (bounded).
      for (let i = 0; i < 200; i++) {
        sender.announce(capsule, 7);
        const got = await withTimeout(heard, 50);
        if (got) {
          expect(got).toEqual([capsule, 7]);
          break;
        }
        if (i === 199) throw new Error('the admission was never heard');
      }
      sender.close();
      bus.close();
    },
  );
});
