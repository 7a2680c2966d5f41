/**
 * A2A across two replicas on one real Redis, with `@a2a-js/sdk` 1.3.0 unchanged: a task sent on one
 * replica is canceled on the replica that does not own the capsule, and a stream cut by a proxy
 * mid-task is taken up with SubscribeToTask on the other replica: its snapshot plus the rest hold
 * everything the capsule wrote, none of it twice, equal to GetTask.
 */
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestGateway } from '../support/gateway.js';
import { testRedisUrl } from '../support/redis.js';
import { startCuttingProxy } from '../client/cutting-proxy.js';
import { apply, emptyModel, fromTask, userMessage } from '../adapters/a2a/sdk-model.js';
import { startCrossReplica, type CrossReplicaRig } from './cross-replica-rig.js';

const redisUrl = testRedisUrl();

describe.skipIf(!redisUrl)('A2A on every replica', () => {
  let rig: CrossReplicaRig;
  const base = (gw: TestGateway | string) =>
    `${typeof gw === 'string' ? gw : gw.baseUrl}/a2a/${rig.capsule}/`;

  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!, { queue: { orphanGraceMs: 100 } });
  }, 30_000);
  afterAll(async () => rig?.close());

  it('a task sent on the owner is canceled on the other replica', async () => {
    const onOwner = await new ClientFactory().createFromUrl(base(rig.owner));
    const onOther = await new ClientFactory().createFromUrl(base(rig.other));
    const model = emptyModel();
    const stream = onOwner.sendMessageStream(userMessage('#sim {"hold":true}'));
    for await (const ev of stream) {
      apply(model, ev);
      if (model.state === TaskState.TASK_STATE_WORKING) break;
    }
    const canceled = await onOther.cancelTask({ id: model.id } as never);
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await onOwner.getTask({ id: model.id } as never)).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });

  it('a stream cut mid-task resumes on the other replica with nothing lost or repeated', async () => {
    const proxy = await startCuttingProxy(rig.owner.baseUrl, { lifetimeMs: 800 });
    try {
      const viaProxy = await new ClientFactory().createFromUrl(base(proxy.url));
      const onOther = await new ClientFactory().createFromUrl(base(rig.other));
      const model = emptyModel();
      let cut = false;
      try {
        for await (const ev of viaProxy.sendMessageStream(
          userMessage('#sim {"chunks":40,"delayMs":60,"tools":1}'),
        ))
          apply(model, ev);
      } catch {
        cut = true;
      }
      expect(cut).toBe(true);
      expect(proxy.kills).toBeGreaterThan(0);
      expect(model.id).not.toBe('');
      const before = model.artifacts.get('response') ?? '';
      const resumed = emptyModel();
      for await (const ev of onOther.resubscribeTask({ id: model.id } as never)) apply(resumed, ev);
      expect(resumed.events[0]).toBe('task');
      expect(resumed.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const full = Array.from({ length: 40 }, (_, i) => `chunk ${i + 1}`).join(' ');
      expect(resumed.artifacts.get('response')).toBe(full);
      expect(full.startsWith(before)).toBe(true);
      expect([...resumed.artifacts.keys()].filter((k) => k.startsWith('tool-'))).toHaveLength(1);
      const got = fromTask(await onOther.getTask({ id: model.id } as never));
      expect(got.artifacts).toEqual(resumed.artifacts);
      expect(got.state).toBe(resumed.state);
    } finally {
      await proxy.close();
    }
  });
});
