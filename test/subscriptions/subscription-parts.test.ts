/**
 * The pieces of subscriptions on their own: glob matching, the retry schedule's range, receiver
 * address classes, key rotation keeping old keys published through the replay window, callback
 * tokens, and the store's compare-and-set and per-owner bound on both stores (Redis for real).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { MemoryStreamStore } from '../../src/streams/memory-stream-store.js';
import { Subscriptions } from '../../src/subscriptions/manager.js';
import { globMatches } from '../../src/subscriptions/glob.js';
import { MemorySubscriptionStore } from '../../src/subscriptions/memory-subscription-store.js';
import { addressClass } from '../../src/webhooks/receiver-url.js';
import { RedisSubscriptionStore } from '../../src/subscriptions/redis-subscription-store.js';
import { RETRY_MAX_MS, retryDelayMs } from '../../src/webhooks/retry.js';
import {
  callbackToken,
  currentKey,
  freshKeyRing,
  jwksOf,
  rotated,
  verifyCallbackToken,
} from '../../src/subscriptions/signing.js';
import type { SubscriptionDoc, SubscriptionStore } from '../../src/subscriptions/types.js';
import { testRedisUrl } from '../support/redis.js';

describe('glob patterns', () => {
  it.each([
    ['events/*', 'events/a', true],
    ['events/*', 'events/a/b', false],
    ['events/*', 'events', false],
    ['events/**', 'events', true],
    ['events/**', 'events/a/b/c', true],
    ['**/x', 'a/b/x', true],
    ['**/x', 'x', true],
    ['a/*/c', 'a/b/c', true],
    ['a/*/c', 'a/b/d', false],
    ['exact', 'exact', true],
  ])('%s against %s is %s', (pattern, path, expected) => {
    expect(globMatches(pattern, path)).toBe(expected);
  });
});

describe('retry schedule', () => {
  it('doubles from 1 s to 60 s with ±20 % jitter', () => {
    expect(retryDelayMs(1, () => 0)).toBe(800);
    expect(retryDelayMs(1, () => 1)).toBe(1200);
    expect(retryDelayMs(2, () => 0.5)).toBe(2000);
    expect(retryDelayMs(6, () => 0.5)).toBe(32_000);
    expect(retryDelayMs(7, () => 0.5)).toBe(RETRY_MAX_MS);
    expect(retryDelayMs(50, () => 1)).toBe(RETRY_MAX_MS * 1.2);
  });
});

describe('receiver address classes', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.9.9.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'internal'],
    ['172.31.255.255', 'internal'],
    ['172.32.0.1', 'public'],
    ['192.168.0.1', 'internal'],
    ['169.254.169.254', 'internal'],
    ['100.64.0.1', 'internal'],
    ['0.0.0.0', 'internal'],
    ['fe80::1', 'internal'],
    ['fd12::1', 'internal'],
    ['::ffff:a00:1', 'internal'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['93.184.216.34', 'public'],
    ['2606:4700::1111', 'public'],
  ])('%s is %s', (ip, cls) => {
    expect(addressClass(ip)).toBe(cls);
  });
});

describe('signing keys and callback tokens', () => {
  it('rotation keeps the old key published through the replay window, then drops it', () => {
    const ring = freshKeyRing();
    const oldKid = currentKey(ring).kid;
    const t0 = Date.now();
    const next = rotated(ring, 60_000, t0);
    expect(currentKey(next).kid).not.toBe(oldKid);
    expect(jwksOf(next, 60_000, t0 + 59_000).keys.map((k) => k.kid)).toEqual([oldKid, currentKey(next).kid]);
    expect(jwksOf(next, 60_000, t0 + 60_000).keys.map((k) => k.kid)).toEqual([currentKey(next).kid]);
    // Published keys never carry the private part.
    expect(jwksOf(next, 60_000, t0).keys.every((k) => !('d' in k))).toBe(true);
  });

  it('a token verifies only with the ring that signed it', async () => {
    const ring = freshKeyRing();
    const token = await callbackToken(ring, { sub: '|s', wakeId: 'w_1', generation: 3 }, 60);
    expect(await verifyCallbackToken(ring, token)).toEqual({
      ok: true,
      claims: { sub: '|s', wakeId: 'w_1', generation: 3 },
    });
    expect(await verifyCallbackToken(freshKeyRing(), token)).toEqual({ ok: false, code: 'TOKEN_INVALID' });
  });
});

const doc = (id: string, owner: string | null): SubscriptionDoc => ({
  id,
  owner,
  type: 'pull-wake',
  pattern: 'a/*',
  webhookUrl: null,
  wakeStream: 'w',
  wakeStorePath: 'w',
  leaseTtlMs: 1000,
  description: null,
  configHash: 'h',
  createdAt: new Date(0).toISOString(),
  status: 'active',
  links: [],
  generation: 0,
  wake: null,
  signalled: false,
  attempts: 0,
  nextAttemptAt: 0,
  deliverer: null,
  baseUrl: 'http://127.0.0.1',
});

const redisUrl = testRedisUrl();
const stores: [string, () => { store: SubscriptionStore; done(): void }][] = [
  ['memory', () => ({ store: new MemorySubscriptionStore(), done: () => {} })],
  [
    'Redis',
    () => {
      if (!redisUrl) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');
      const client = new Redis(redisUrl);
      return {
        store: new RedisSubscriptionStore(client, `test:subs:${randomUUID()}`),
        done: () => client.disconnect(),
      };
    },
  ],
];

describe.each(stores)('subscription store (%s)', (name, make) => {
  it.skipIf(name === 'Redis' && !redisUrl && process.env.REQUIRE_REDIS !== '1')(
    'writes only over the version it read, bounds each owner, and keeps one key ring',
    async () => {
      const { store, done } = make();
      try {
        expect(await store.put('o|a', 0, doc('a', 'o'), 2)).toEqual({ kind: 'written', version: 1 });
        // A writer that read before the first write is refused.
        expect(await store.put('o|a', 0, doc('a', 'o'), 2)).toEqual({ kind: 'moved' });
        expect(await store.put('o|a', 1, { ...doc('a', 'o'), generation: 5 }, 2)).toEqual({
          kind: 'written',
          version: 2,
        });
        expect((await store.get('o|a'))?.doc.generation).toBe(5);
        expect(await store.put('o|b', 0, doc('b', 'o'), 2)).toEqual({ kind: 'written', version: 1 });
        expect(await store.put('o|c', 0, doc('c', 'o'), 2)).toEqual({ kind: 'owner_full' });
        expect(await store.get('o|c')).toBeNull();
        expect(await store.put('p|c', 0, doc('c', 'p'), 2)).toEqual({ kind: 'written', version: 1 });
        expect(await store.put('o|b', 1, null, 2)).toEqual({ kind: 'written', version: 0 });
        expect(await store.put('o|c', 0, doc('c', 'o'), 2)).toEqual({ kind: 'written', version: 1 });
        expect((await store.keys()).sort()).toEqual(['o|a', 'o|c', 'p|c']);
        expect((await store.ownerKeys('o')).sort()).toEqual(['o|a', 'o|c']);
        expect(await store.ownerKeys(null)).toEqual([]);
        const ring = await store.keyRing(freshKeyRing);
        expect(await store.keyRing(freshKeyRing)).toEqual(ring);
        const next = rotated(ring, 1000);
        expect(await store.replaceKeyRing(freshKeyRing(), next)).toBe(false);
        expect(await store.replaceKeyRing(ring, next)).toBe(true);
        expect(await store.keyRing(freshKeyRing)).toEqual(next);
      } finally {
        done();
      }
    },
  );
});

describe('key rotation across replicas', () => {
  it('one replica rotates a key that is due, the other adopts it, and both publish old and new', async () => {
    const store = new MemorySubscriptionStore();
    const streams = new MemoryStreamStore({ maxStreams: 10 });
    const settings = {
      receivers: { allowLoopback: false, allowHosts: [] },
      maxPerOwner: 10,
      maxWakesPerOwner: 10,
      replayWindowMs: 60_000,
      sweepMs: 1000,
      deliveryTimeoutMs: 1000,
      tokenTtlSeconds: 60,
      keyRotationMs: 10_000,
    };
    const logger = pino({ level: 'silent' });
    const a = new Subscriptions(store, streams, { ...settings, replicaId: 'a' }, logger);
    const b = new Subscriptions(store, streams, { ...settings, replicaId: 'b' }, logger);
    const first = await a.currentKid();
    expect(await b.currentKid()).toBe(first);
    const later = Date.now() + 10_000;
    const rotatedRing = await a.refreshKeys(later);
    const second = currentKey(rotatedRing).kid;
    expect(second).not.toBe(first);
    // b sees a fresh key: nothing to rotate, it takes the stored ring.
    expect(currentKey(await b.refreshKeys(later)).kid).toBe(second);
    expect((await b.jwks()).keys.map((k) => k.kid)).toEqual([first, second]);
  });
});
