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

describe.skipIf(!redisUrl)('A2A cursors on every replica', () => {
  let rig: CrossReplicaRig;
  beforeAll(async () => {
    rig = await startCrossReplica(redisUrl!, { queue: { orphanGraceMs: 100 } });
  }, 30_000);
  afterAll(async () => rig?.close());

  const call = (gw: TestGateway, body: unknown, lastEventId?: string, signal?: AbortSignal) =>
    fetch(`${gw.baseUrl}/a2a/${rig.capsule}/`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'a2a-version': '1.0',
        ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}),
      },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });

  /** Events of an SSE body until `stop` says so (then the connection is dropped). */
  const readUntil = async (res: Response, stop: (n: number) => boolean, abort: AbortController) => {
    const events: { id: string; result: Record<string, unknown> }[] = [];
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const id = /^id: (\d+)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (id && data)
            events.push({ id, result: (JSON.parse(data) as { result: Record<string, unknown> }).result });
        }
        if (stop(events.length)) {
          abort.abort();
          break;
        }
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
    return events;
  };

  it("a snapshot's id, sent as Last-Event-ID to the other replica, continues exactly after it", async () => {
    const send = new AbortController();
    const sent = await call(
      rig.owner,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'SendStreamingMessage',
        params: {
          message: {
            messageId: 'm-x',
            role: 'ROLE_USER',
            parts: [{ text: '#sim {"chunks":30,"delayMs":60}' }],
          },
        },
      },
      undefined,
      send.signal,
    );
    const head = await readUntil(sent, (n) => n >= 4, send);
    const taskId = (head[0]?.result.task as { id: string }).id;
    // A snapshot mid-task on the owner, then the rest from its id on the other replica.
    const snap = new AbortController();
    const snapshot = await readUntil(
      await call(
        rig.owner,
        { jsonrpc: '2.0', id: 2, method: 'SubscribeToTask', params: { id: taskId } },
        undefined,
        snap.signal,
      ),
      (n) => n >= 1,
      snap,
    );
    const first = snapshot[0]!;
    const rest = await readUntil(
      await call(
        rig.other,
        { jsonrpc: '2.0', id: 3, method: 'SubscribeToTask', params: { id: taskId } },
        first.id,
      ),
      () => false,
      new AbortController(),
    );
    const textOf = (a: { parts: { text: string }[] }) => a.parts.map((p) => p.text).join('');
    const snapArtifacts = (
      first.result.task as { artifacts: { artifactId: string; parts: { text: string }[] }[] }
    ).artifacts;
    let response = textOf(snapArtifacts.find((a) => a.artifactId === 'response') ?? { parts: [] });
    for (const e of rest) {
      expect(Number(e.id)).toBeGreaterThan(Number(first.id));
      const u = e.result.artifactUpdate as
        { artifact: { artifactId: string; parts: { text: string }[] }; append: boolean } | undefined;
      if (u?.artifact.artifactId === 'response') response = (u.append ? response : '') + textOf(u.artifact);
    }
    expect(response).toBe(Array.from({ length: 30 }, (_, i) => `chunk ${i + 1}`).join(' '));
    const last = rest[rest.length - 1]?.result.statusUpdate as { status: { state: string } };
    expect(last.status.state).toBe('TASK_STATE_COMPLETED');
  });
});
