/**
 * Flue across two replicas on one real Redis, with the official `@flue/sdk`: a message sent on one
 * replica is observed and read on the other, an idempotent resend on the other is the same
 * submission (also when both replicas receive it at the same instant), and an updates reader
 * hopping replicas with `Stream-Next-Offset` reads exactly what one replica serves.
 */
import { createFlueClient } from '@flue/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { startCrossReplica, type CrossReplicaRig } from './cross-replica-rig.js';

const redisUrl = testRedisUrl();

describe.skipIf(!redisUrl)('Flue on every replica', () => {
  let rig: CrossReplicaRig;
  const url = (gw: TestGateway, conv: string) => `${gw.baseUrl}/flue/${rig.capsule}/${conv}`;

  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!);
  }, 30_000);
  afterAll(async () => rig?.close());

  it('send on one replica; wait, read and history on the other', async () => {
    const onA = createFlueClient({ url: url(rig.owner, 'conv-hop') });
    const onB = createFlueClient({ url: url(rig.other, 'conv-hop') });
    const admission = await onB.send({ message: { kind: 'user', body: 'sent on b' } });
    await onA.wait(admission);
    expect((await onA.read(admission)).text).toBe('Echo: sent on b');
    const second = await onA.send({ message: { kind: 'user', body: 'then on a' } });
    await onB.wait(second);
    const [ha, hb] = await Promise.all([onA.history(), onB.history()]);
    expect(hb).toEqual(ha);
    expect(hb.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  });

  it('an idempotent resend on the other replica is the same submission', async () => {
    const onA = createFlueClient({ url: url(rig.owner, 'conv-idem') });
    const onB = createFlueClient({ url: url(rig.other, 'conv-idem') });
    const message = { kind: 'user' as const, body: 'exactly once' };
    const first = await onA.send({ message, idempotencyKey: 'k1' });
    const again = await onB.send({ message, idempotencyKey: 'k1' });
    expect(again.submissionId).toBe(first.submissionId);
    await onB.wait(first);
    expect((await onB.history()).messages.filter((m) => m.role === 'user')).toHaveLength(1);
  });

  it('the same idempotency key on both replicas at the same instant admits one message', async () => {
    const onA = createFlueClient({ url: url(rig.owner, 'conv-race') });
    const onB = createFlueClient({ url: url(rig.other, 'conv-race') });
    const message = { kind: 'user' as const, body: 'raced' };
    const [x, y] = await Promise.all([
      onA.send({ message, idempotencyKey: 'k-race' }),
      onB.send({ message, idempotencyKey: 'k-race' }),
    ]);
    expect(y.submissionId).toBe(x.submissionId);
    await onA.wait(x);
    const history = await onB.history();
    expect(history.messages.filter((m) => m.role === 'user')).toHaveLength(1);
    expect(history.settlements).toEqual([{ submissionId: x.submissionId, outcome: 'completed' }]);
  });

  it('an updates reader hopping replicas with Stream-Next-Offset reads what one replica serves', async () => {
    const conv = 'conv-offsets';
    const client = createFlueClient({ url: url(rig.other, conv) });
    // Enough records for several pages of updates.
    await client.wait(await client.send({ message: { kind: 'user', body: '#sim {"chunks":250}' } }));
    const readAll = async (pick: (page: number) => TestGateway): Promise<unknown[]> => {
      const chunks: unknown[] = [];
      let offset = '-1';
      for (let page = 0; ; page++) {
        const res = await fetch(`${url(pick(page), conv)}?view=updates&offset=${offset}`);
        expect(res.status).toBe(200);
        const body = (await res.json()) as unknown[];
        chunks.push(...body);
        const next = res.headers.get('Stream-Next-Offset')!;
        if (next === offset || body.length === 0) return chunks;
        offset = next;
      }
    };
    const one = await readAll(() => rig.owner);
    const hopped = await readAll((page) => (page % 2 === 0 ? rig.other : rig.owner));
    expect(one.length).toBeGreaterThan(250);
    expect(hopped).toEqual(one);
  });
});
