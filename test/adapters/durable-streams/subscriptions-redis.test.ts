/**
 * Subscriptions kept in Redis: a gateway restarted on the same Redis still has the subscription,
 * its acked offsets and its signing keys, and delivers again a wake that was not acked before it
 * went (at least once); two replicas on one Redis deliver each subscription from one replica at a
 * time (the deliverer lease in the subscription's document), and when the delivering replica goes
 * the other takes the un-acked wake over.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { testRedisUrl } from '../../support/redis.js';
import {
  signatureVerifies,
  startWebhookReceiver,
  type WebhookReceiver,
} from '../../support/webhook-receiver.js';

const redisUrl = testRedisUrl();
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

const start = async (prefix: string, replicaId: string): Promise<TestGateway> => {
  const gw = await startTestGateway({
    capsules: {},
    redisUrl: redisUrl!,
    extra: {
      fleet: { replicaId },
      durableStreams: { writable: true, subscriptions: { sweepMs: 100 } },
      webhooks: { allowLoopback: true, timeoutMs: 2000 },
    },
    tuning: { streams: { keyPrefix: prefix } },
  });
  open.push(gw);
  return gw;
};

const receiverWith = async (answers: { status: number; body: unknown }[]): Promise<WebhookReceiver> => {
  const r = await startWebhookReceiver(answers);
  open.push(r);
  return r;
};

const JSON_HEADERS = { 'content-type': 'application/json' };
const write = (gw: TestGateway, path: string, method: 'PUT' | 'POST', body: unknown): Promise<Response> =>
  fetch(`${gw.baseUrl}/v1/stream/${path}`, { method, headers: JSON_HEADERS, body: JSON.stringify(body) });
interface View {
  generation: number;
  streams: { path: string; link_type: string; acked_offset: string }[];
}
const subscription = async (gw: TestGateway, id: string): Promise<View> =>
  (await (await fetch(`${gw.baseUrl}/v1/stream/__ds/subscriptions/${id}`)).json()) as View;
const jwks = async (gw: TestGateway): Promise<{ keys: Record<string, string>[] }> =>
  (await fetch(`${gw.baseUrl}/v1/stream/__ds/jwks.json`)).json() as Promise<{
    keys: Record<string, string>[];
  }>;

/** The subscription's document as Redis holds it (who delivers it, its wake). */
interface Stored {
  deliverer: { replica: string } | null;
  wake: { generation: number } | null;
  attempts: number;
  nextAttemptAt: number;
}
const stored = async (prefix: string, id: string): Promise<Stored | null> => {
  const redis = new Redis(redisUrl!);
  try {
    return JSON.parse((await redis.hget(`${prefix}:{subs}:doc:|${id}`, 'doc')) ?? 'null') as Stored | null;
  } finally {
    redis.disconnect();
  }
};

const eventually = async <T>(read: () => Promise<T>, check: (v: T) => boolean): Promise<T> => {
  for (let i = 0; i < 300; i++) {
    const v = await read();
    if (check(v)) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('condition never held');
};

describe.skipIf(!redisUrl && process.env.REQUIRE_REDIS !== '1')('subscriptions on Redis', () => {
  if (!redisUrl) throw new Error('REQUIRE_REDIS=1 but no test Redis is available');

  it('keeps the subscription, its acked offsets and keys over a restart, and delivers an un-acked wake again', async () => {
    const prefix = `test:ds:subs:${randomUUID()}`;
    // The first wake is done at once; the second is received and never acked.
    const receiver = await receiverWith([
      { status: 200, body: { done: true } },
      { status: 200, body: {} },
    ]);
    let gw = await start(prefix, 'replica-1');
    const created = await fetch(`${gw.baseUrl}/v1/stream/__ds/subscriptions/durable`, {
      method: 'PUT',
      headers: JSON_HEADERS,
      body: JSON.stringify({
        type: 'webhook',
        pattern: 'live/*',
        webhook: { url: receiver.url },
        lease_ttl_ms: 1000,
      }),
    });
    expect(created.status).toBe(201);
    const kid = ((await created.json()) as { webhook: { signing: { kid: string } } }).webhook.signing.kid;
    const first = await write(gw, 'live/a', 'PUT', { n: 1 });
    const tail1 = first.headers.get('stream-next-offset')!;
    await receiver.delivery(1);
    await eventually(
      () => subscription(gw, 'durable'),
      (s) => s.streams[0]?.acked_offset === tail1,
    );
    const second = await write(gw, 'live/a', 'POST', { n: 2 });
    const tail2 = second.headers.get('stream-next-offset')!;
    const unacked = await receiver.delivery(2);
    expect(unacked.body.streams[0]).toMatchObject({ acked_offset: tail1, tail_offset: tail2 });

    await gw.close();
    open.splice(open.indexOf(gw), 1);
    gw = await start(prefix, 'replica-2');
    const after = await subscription(gw, 'durable');
    expect(after).toMatchObject({
      id: 'durable',
      type: 'webhook',
      pattern: 'live/*',
      webhook: { url: receiver.url, signing: { kid } },
      streams: [{ path: 'live/a', link_type: 'pattern', acked_offset: tail1 }],
    });
    const keys = await jwks(gw);
    expect(keys.keys.map((k) => k.kid)).toEqual([kid]);
    // The lease of the un-acked wake lapses; the new gateway wakes the same work again.
    const again = await receiver.delivery(3);
    expect(again.body.generation).toBe(unacked.body.generation + 1);
    expect(again.body.streams[0]).toMatchObject({ path: 'live/a', acked_offset: tail1, tail_offset: tail2 });
    expect(signatureVerifies(again, keys)).toBe(true);
    // The callback URL is built on the base the subscription was made under (publicUrl in a
    // deployment); this restarted gateway listens on another port, so the test calls it there.
    expect(again.body.callback_url).toMatch(/\/v1\/stream\/__ds\/subscriptions\/durable\/callback$/);
    const done = await fetch(`${gw.baseUrl}/v1/stream/__ds/subscriptions/durable/callback`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, authorization: `Bearer ${again.body.callback_token}` },
      body: JSON.stringify({
        wake_id: again.body.wake_id,
        generation: again.body.generation,
        acks: [{ stream: 'live/a', offset: tail2 }],
        done: true,
      }),
    });
    expect([done.status, await done.json()]).toEqual([200, { ok: true, next_wake: false }]);
  });

  it('keeps the retry schedule (next_attempt_at and the attempt count) over a restart', async () => {
    const prefix = `test:ds:subs:${randomUUID()}`;
    const receiver = await receiverWith([
      { status: 503, body: {} },
      { status: 503, body: {} },
      { status: 200, body: { done: true } },
    ]);
    let gw = await start(prefix, 'replica-1');
    const created = await fetch(`${gw.baseUrl}/v1/stream/__ds/subscriptions/retrying`, {
      method: 'PUT',
      headers: JSON_HEADERS,
      body: JSON.stringify({ type: 'webhook', streams: ['retry/a'], webhook: { url: receiver.url } }),
    });
    expect(created.status).toBe(201);
    expect((await write(gw, 'retry/a', 'PUT', { n: 1 })).status).toBe(201);
    await receiver.delivery(2);
    // Two failures in a row: the second retry waits 2 s ± 20 %.
    const before = await eventually(
      () => stored(prefix, 'retrying'),
      (d) => d?.attempts === 2,
    );
    const nextAt = before!.nextAttemptAt;
    await gw.close();
    open.splice(open.indexOf(gw), 1);
    gw = await start(prefix, 'replica-2');
    const view = (await (await fetch(`${gw.baseUrl}/v1/stream/__ds/subscriptions/retrying`)).json()) as {
      next_attempt_at?: string;
    };
    // Shown while it is ahead; the stored value is the schedule either way.
    if (view.next_attempt_at !== undefined) expect(Date.parse(view.next_attempt_at)).toBe(nextAt);
    const third = await receiver.delivery(3);
    expect(third.body.generation).toBe(3);
    const after = await eventually(
      () => stored(prefix, 'retrying'),
      (d) => d?.attempts === 0,
    );
    expect(after!.nextAttemptAt).toBe(0);
  });

  it('delivers each subscription from one replica at a time, and the other takes over when it goes', async () => {
    const prefix = `test:ds:subs:${randomUUID()}`;
    const receiver = await receiverWith([{ status: 200, body: { done: true } }]);
    const a = await start(prefix, 'replica-a');
    const b = await start(prefix, 'replica-b');
    const created = await fetch(`${a.baseUrl}/v1/stream/__ds/subscriptions/shared`, {
      method: 'PUT',
      headers: JSON_HEADERS,
      body: JSON.stringify({
        type: 'webhook',
        pattern: 'fleet/*',
        webhook: { url: receiver.url },
        lease_ttl_ms: 1000,
      }),
    });
    expect(created.status).toBe(201);
    // Appends through both replicas, each waited for: every wake delivered once, generations in order.
    const ROUNDS = 6;
    for (let i = 1; i <= ROUNDS; i++) {
      const via = i % 2 === 0 ? a : b;
      const res = await write(via, `fleet/${i}`, 'PUT', { i });
      expect(res.status).toBe(201);
      const delivery = await receiver.delivery(i);
      expect(delivery.body.streams.find((s) => s.path === `fleet/${i}`)).toMatchObject({ has_pending: true });
      await eventually(
        () => subscription(a, 'shared'),
        (s) =>
          s.streams.find((l: { path: string }) => l.path === `fleet/${i}`)?.acked_offset ===
          res.headers.get('stream-next-offset'),
      );
    }
    const generations = receiver.deliveries.map((d) => d.body.generation);
    expect(generations).toEqual([...generations].sort((x, y) => x - y));
    expect(new Set(generations).size).toBe(generations.length);
    expect(new Set(receiver.deliveries.map((d) => d.body.wake_id)).size).toBe(generations.length);

    // Failover: the receiver stops acking; whoever delivers holds the lease; it goes; the other
    // replica delivers the un-acked wake again.
    const hold = await receiverWith([{ status: 200, body: {} }]);
    const held = await fetch(`${a.baseUrl}/v1/stream/__ds/subscriptions/held`, {
      method: 'PUT',
      headers: JSON_HEADERS,
      // A lease long enough that the delivering replica is gone before it lapses.
      body: JSON.stringify({
        type: 'webhook',
        streams: ['fleet/held'],
        webhook: { url: hold.url },
        lease_ttl_ms: 2000,
      }),
    });
    expect(held.status).toBe(201);
    expect((await write(a, 'fleet/held', 'PUT', { n: 1 })).status).toBe(201);
    const firstWake = await hold.delivery(1);
    const doc = await eventually(
      () => stored(prefix, 'held'),
      (d) => d?.deliverer?.replica !== undefined,
    );
    const deliverer = doc!.deliverer!.replica;
    const [gone, survivor] = deliverer === 'replica-a' ? [a, b] : [b, a];
    await gone.close();
    open.splice(open.indexOf(gone), 1);
    const secondWake = await hold.delivery(2);
    expect(secondWake.body.generation).toBe(firstWake.body.generation + 1);
    const after = await eventually(
      () => stored(prefix, 'held'),
      (d) => d?.wake?.generation === secondWake.body.generation,
    );
    expect(after!.deliverer!.replica).toBe(deliverer === 'replica-a' ? 'replica-b' : 'replica-a');
    expect(hold.deliveries).toHaveLength(2);
    expect((await subscription(survivor, 'held')).generation).toBe(secondWake.body.generation);
  });
});
