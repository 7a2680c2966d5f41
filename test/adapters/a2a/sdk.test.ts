/**
 * The A2A surface against the real `@a2a-js/sdk` 1.3.0 client, unchanged, in front of the capsule
 * simulator: discovery, send and stream, a busy capsule queueing, GetTask equal to what was
 * streamed, ListTasks, cancel, and resuming from `id:` cursors.
 */
import { request, type IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import { TaskState } from '@a2a-js/sdk';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { uniqueCapsule } from '../../support/redis.js';
import { until } from '../../support/deadlines.js';
import { apply, emptyModel, fromTask, userMessage } from './sdk-model.js';
import { sseEvents } from './sse.js';

let sims: SimulatedCapsule[] = [];
let gateways: TestGateway[] = [];

afterEach(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await Promise.all(sims.map((s) => s.stop()));
  gateways = [];
  sims = [];
});

const setup = async () => {
  const sim = await startSimulator({ taskAcceptance: 'single' });
  sims.push(sim);
  const capsule = uniqueCapsule('a2a');
  const gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    tuning: { queue: { orphanGraceMs: 100 } },
  });
  gateways.push(gw);
  const base = `${gw.baseUrl}/a2a/${capsule}/`;
  return { sim, gw, capsule, base };
};

const clientFor = (base: string): Promise<Client> => new ClientFactory().createFromUrl(base);

describe('A2A surface with @a2a-js/sdk 1.3.0', () => {
  it('serves an A2A 1.0 card whose JSON-RPC interface is the gateway', async () => {
    const { base, capsule } = await setup();
    const res = await fetch(`${base}.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    const card = (await res.json()) as Record<string, unknown>;
    expect(card.supportedInterfaces).toEqual([
      { url: base, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: base, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ]);
    expect(card.capabilities).toEqual({
      streaming: true,
      pushNotifications: true,
      extendedAgentCard: false,
    });
    expect(typeof card.name).toBe('string');
    expect(String(card.description)).toContain(capsule);
    expect((card.skills as unknown[]).length).toBe(1);
    const client = await clientFor(base);
    expect((await client.getAgentCard()).name).toBe(card.name);
  });

  it('a capsule whose card has a description and skills: the A2A card shows them', async () => {
    const sim = await startSimulator({ taskAcceptance: 'single', release: '1.0' });
    sims.push(sim);
    const capsule = uniqueCapsule('a2a');
    const gw = await startTestGateway({ capsules: { [capsule]: sim.url } });
    gateways.push(gw);
    await until(async () => ((await gw.core.status(capsule)).card ? true : undefined), 10_000);
    const client = await clientFor(`${gw.baseUrl}/a2a/${capsule}/`);
    const card = await client.getAgentCard();
    expect(card.name).toBe('murmur-simulator');
    expect(card.description).toMatch(
      /^A simulated Murmur capsule: it echoes each message back in chunks\.\n\n/,
    );
    expect(card.skills.map((s) => [s.id, s.name, s.description, s.tags])).toEqual([
      ['echo', 'Echo', 'Answers every message with "Echo: " and the message, in chunks.', ['simulator']],
    ]);
    // The capsule speaks A2A 1.0 itself; the gateway's door serves it the same way.
    const model = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('on the 1.0 line'))) apply(model, ev);
    expect(model.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(model.artifacts.get('response')).toBe('Echo: on the 1.0 line');
  });

  it('streams a task to completion, and GetTask equals what was streamed', async () => {
    const { base } = await setup();
    const client = await clientFor(base);
    const model = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('#sim {"chunks":5,"tools":1,"thinking":1}')))
      apply(model, ev);
    expect(model.events[0]).toBe('task');
    expect(model.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(model.artifacts.get('response')).toBe('chunk 1 chunk 2 chunk 3 chunk 4 chunk 5');
    expect(model.artifacts.get('thinking')).toBe('thought 1');
    expect([...model.artifacts.keys()].filter((k) => k.startsWith('tool-'))).toHaveLength(1);
    const got = fromTask(await client.getTask({ id: model.id } as never));
    expect(got.state).toBe(model.state);
    expect(got.contextId).toBe(model.contextId);
    expect(got.artifacts).toEqual(model.artifacts);
    const task = await client.getTask({ id: model.id } as never);
    expect(task.history).toHaveLength(1);
    expect(task.history[0]?.parts[0]?.content).toEqual({
      $case: 'text',
      value: '#sim {"chunks":5,"tools":1,"thinking":1}',
    });
  });

  it("SendMessage waits for the task and answers it; ListTasks lists the caller's own", async () => {
    const { base } = await setup();
    const client = await clientFor(base);
    const sent = await client.sendMessage(userMessage('hello there', 'conv-1'));
    const task = 'id' in sent ? sent : null;
    expect(task).not.toBeNull();
    expect(task?.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task?.contextId).toBe('conv-1');
    expect(fromTask(task as never).artifacts.get('response')).toBe('Echo: hello there');
    const list = await client.listTasks({} as never);
    expect(list.tasks.map((t) => t.id)).toEqual([task?.id]);
    const inContext = await client.listTasks({ contextId: 'other' } as never);
    expect(inContext.tasks).toEqual([]);
    // Pages, newest first.
    const second = await client.sendMessage(userMessage('second', 'conv-2'));
    const third = await client.sendMessage(userMessage('third', 'conv-1'));
    const ids = [third, second, sent].map((t) => ('id' in t ? t.id : ''));
    const page1 = await client.listTasks({ pageSize: 2 } as never);
    expect([page1.tasks.map((t) => t.id), page1.pageSize, page1.totalSize]).toEqual([ids.slice(0, 2), 2, 3]);
    const page2 = await client.listTasks({ pageSize: 2, pageToken: page1.nextPageToken } as never);
    expect([page2.tasks.map((t) => t.id), page2.nextPageToken]).toEqual([ids.slice(2), '']);
    const conv1 = await client.listTasks({ contextId: 'conv-1' } as never);
    expect(conv1.tasks.map((t) => t.id)).toEqual([ids[0], ids[2]]);
  });

  it('a busy capsule queues the next message; cancelling the running one lets it run', async () => {
    const { base, sim } = await setup();
    const client = await clientFor(base);
    const first = emptyModel();
    const firstStream = client.sendMessageStream(userMessage('#sim {"hold":true}'));
    for await (const ev of firstStream) {
      apply(first, ev);
      if (first.state === TaskState.TASK_STATE_WORKING) break;
    }
    const queued = emptyModel();
    const second = client.sendMessageStream(userMessage('after the hold'));
    const next = await second.next();
    apply(queued, next.value as never);
    expect(queued.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(sim.runs.size).toBe(1);
    const canceled = await client.cancelTask({ id: first.id } as never);
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    for await (const ev of second) apply(queued, ev);
    expect(queued.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(queued.artifacts.get('response')).toBe('Echo: after the hold');
    // Cancelling an ended task: -32002.
    await expect(client.cancelTask({ id: first.id } as never)).rejects.toThrow(/-32002|cannot be canceled/i);
  });

  it('cancelling a queued task withdraws it before it reaches the capsule', async () => {
    const { base, sim } = await setup();
    const client = await clientFor(base);
    const running = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('#sim {"hold":true}'))) {
      apply(running, ev);
      if (running.state === TaskState.TASK_STATE_WORKING) break;
    }
    const queued = await client.sendMessage({
      ...userMessage('never runs', 'queued-ctx'),
      configuration: { returnImmediately: true },
    } as never);
    const queuedId = 'id' in queued ? queued.id : '';
    expect('id' in queued && queued.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const canceled = await client.cancelTask({ id: queuedId } as never);
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await client.cancelTask({ id: running.id } as never);
    // The capsule is free again and ran only the first task.
    const after = await client.sendMessage(userMessage('then this'));
    expect('id' in after && after.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(sim.runs.size).toBe(2);
    expect((await client.getTask({ id: queuedId } as never)).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });

  it("cancelling one queued task leaves its context's other queued tasks queued", async () => {
    const { base, sim } = await setup();
    const client = await clientFor(base);
    const running = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('#sim {"hold":true}'))) {
      apply(running, ev);
      if (running.state === TaskState.TASK_STATE_WORKING) break;
    }
    const queue = async (text: string): Promise<string> => {
      const sent = await client.sendMessage({
        ...userMessage(text, 'one-context'),
        configuration: { returnImmediately: true },
      } as never);
      return 'id' in sent ? sent.id : '';
    };
    const canceledId = await queue('canceled while queued');
    const keptId = await queue('still queued');
    const canceled = await client.cancelTask({ id: canceledId } as never);
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await client.getTask({ id: keptId } as never)).status?.state).toBe(
      TaskState.TASK_STATE_SUBMITTED,
    );
    await client.cancelTask({ id: running.id } as never);
    const kept = emptyModel();
    for await (const ev of client.resubscribeTask({ id: keptId } as never)) apply(kept, ev);
    expect(kept.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(kept.artifacts.get('response')).toBe('Echo: still queued');
    expect(sim.runs.size).toBe(2);
    expect((await client.getTask({ id: canceledId } as never)).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });

  it('SubscribeToTask with Last-Event-ID replays exactly what followed that id', async () => {
    const { base } = await setup();
    const client = await clientFor(base);
    const model = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('#sim {"chunks":6}'))) apply(model, ev);
    const call = (lastEventId: string) =>
      fetch(base, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'a2a-version': '1.0', 'last-event-id': lastEventId },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SubscribeToTask', params: { id: model.id } }),
      });
    const all = await sseEvents(await call('0'));
    expect(all[0]?.data).toMatchObject({ jsonrpc: '2.0', id: 7, result: { task: { id: model.id } } });
    const ids = all.map((e) => Number(e.id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    const mid = all[3];
    if (!mid) throw new Error('too few events');
    const rest = await sseEvents(await call(mid.id ?? ''));
    expect(rest).toEqual(all.slice(4));
  });
});

describe('A2A queue bounds', () => {
  it('past the capsule queue bound a send is 429 with Retry-After, and nothing is queued', async () => {
    const sim = await startSimulator({ taskAcceptance: 'single' });
    sims.push(sim);
    const capsule = uniqueCapsule('a2a');
    const gw = await startTestGateway({
      capsules: { [capsule]: sim.url },
      tuning: { queue: { orphanGraceMs: 100 } },
      extra: { queue: { maxPerCapsule: 1 } },
    });
    gateways.push(gw);
    const base = `${gw.baseUrl}/a2a/${capsule}/`;
    const client = await clientFor(base);
    const running = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('#sim {"hold":true}'))) {
      apply(running, ev);
      if (running.state === TaskState.TASK_STATE_WORKING) break;
    }
    const waiting = await client.sendMessage({
      ...userMessage('queued'),
      configuration: { returnImmediately: true },
    } as never);
    expect('id' in waiting && waiting.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const before = await gw.core.status(capsule);
    const res = await fetch(base, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 3,
        method: 'SendMessage',
        params: { message: { messageId: 'm-3', role: 'ROLE_USER', parts: [{ text: 'one too many' }] } },
      }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    const retryAfterSeconds = Number(res.headers.get('retry-after'));
    expect(await res.json()).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: {
        code: -32000,
        message: 'the capsule has too many queued submissions',
        data: { retryAfterSeconds },
      },
    });
    const after = await gw.core.status(capsule);
    expect(after.position).toEqual(before.position);
    expect(after.queue.depth).toBe(1);
    await client.cancelTask({ id: running.id } as never);
  });
});

describe('A2A 0.3 through the SDK legacy transport', () => {
  it("the card's 0.3 interface, used by the 0.3 JSON-RPC transport, streams and reads a task", async () => {
    const { base } = await setup();
    const card = (await (await fetch(`${base}.well-known/agent-card.json`)).json()) as {
      supportedInterfaces: { protocolVersion: string }[];
    };
    // A client that speaks only 0.3: the card's 0.3 interface alone.
    card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
    const legacy = { legacyCompat: { enabled: true } };
    // What goes on the wire: method names and the A2A-Version header.
    const sent: string[] = [];
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: string }) : {};
      sent.push(`${body.method ?? '?'} ${headers.get('a2a-version') ?? '-'}`);
      return fetch(input, init);
    };
    const client = await new ClientFactory({
      transports: [new JsonRpcTransportFactory({ ...legacy, fetchImpl })],
      cardResolver: new DefaultAgentCardResolver(legacy),
    }).createFromAgentCard(card as never);
    const seen: string[] = [];
    const model = emptyModel();
    for await (const ev of client.sendMessageStream(userMessage('#sim {"chunks":3}'))) {
      seen.push(ev.payload?.$case ?? '');
      apply(model, ev);
    }
    expect(seen[0]).toBe('task');
    expect(model.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(model.artifacts.get('response')).toBe('chunk 1 chunk 2 chunk 3');
    const got = fromTask(await client.getTask({ id: model.id } as never));
    expect(got.artifacts).toEqual(model.artifacts);
    expect(got.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(sent).toEqual(['message/stream 0.3', 'tasks/get 0.3']);
  });
});

describe('A2A streams on drain', () => {
  it('a live task stream ends cleanly when the gateway drains', async () => {
    const { base, gw } = await setup();
    const client = await clientFor(base);
    const model = emptyModel();
    const stream = client.sendMessageStream(userMessage('#sim {"hold":true}'));
    for await (const ev of stream) {
      apply(model, ev);
      if (model.state === TaskState.TASK_STATE_WORKING) break;
    }
    const live = emptyModel();
    const resubscribed = client.resubscribeTask({ id: model.id } as never);
    const first = await resubscribed.next();
    apply(live, first.value as never);
    expect(live.state).toBe(TaskState.TASK_STATE_WORKING);
    const rest = (async () => {
      for await (const ev of resubscribed) apply(live, ev);
    })();
    await gw.close();
    await rest;
    expect(live.events).toEqual(['task']);
    gateways = gateways.filter((g) => g !== gw);
  });
});

describe('A2A slow clients', () => {
  it('a client that stops reading holds back only its own stream, then gets all of it, in order', async () => {
    const { base } = await setup();
    const chunks = 300;
    const text = `#sim {"chunks":${chunks},"chunkBytes":20000,"burst":true}`;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'SendStreamingMessage',
      params: { message: { messageId: 'm-slow', role: 'ROLE_USER', parts: [{ text }] } },
    });
    const url = new URL(base);
    // A client that stops reading at once: node:http with its response paused.
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
        },
        resolve,
      );
      req.on('error', reject);
      req.end(body);
    });
    res.pause();
    const client = await clientFor(base);
    // The task's 6 MB end meanwhile (read on another connection), while this one reads nothing.
    await until(async () => {
      const t = (await client.listTasks({} as never)).tasks[0];
      return t && t.status?.state === TaskState.TASK_STATE_COMPLETED ? true : undefined;
    }, 30_000);
    const raw: Buffer[] = [];
    res.on('data', (b: Buffer) => raw.push(b));
    res.resume();
    await new Promise<void>((resolve) => res.on('end', () => resolve()));
    const events = Buffer.concat(raw)
      .toString('utf8')
      .split('\n\n')
      .filter((b) => b.includes('data: '))
      .map((b) => ({
        id: Number(/^id: (\d+)$/m.exec(b)?.[1]),
        result: (JSON.parse(/^data: (.*)$/m.exec(b)![1]!) as { result: Record<string, unknown> }).result,
      }));
    const ids = events.map((e) => e.id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    const responseText = events
      .map(
        (e) =>
          e.result.artifactUpdate as
            { artifact: { artifactId: string; parts: { text: string }[] } } | undefined,
      )
      .filter((u) => u?.artifact.artifactId === 'response')
      .map((u) => u!.artifact.parts[0]!.text)
      .join('');
    const expected = Array.from({ length: chunks }, (_, i) => {
      const chunk = `chunk ${i + 1}${i < chunks - 1 ? ' ' : ''}`;
      return chunk + 'x'.repeat(20000 - chunk.length);
    }).join('');
    expect(responseText.length).toBe(expected.length);
    expect(responseText === expected).toBe(true);
    const end = events[events.length - 1]?.result.statusUpdate as { status: { state: string } };
    expect(end.status.state).toBe('TASK_STATE_COMPLETED');
  }, 60_000);
});
