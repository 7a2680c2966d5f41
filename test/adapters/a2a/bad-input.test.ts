/**
 * Every bad input to the A2A surface gets its exact JSON-RPC error (status and body), and none of
 * them appends to the capsule's log or queues anything. Also the 0.3 wire (no `A2A-Version`).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { uniqueCapsule } from '../../support/redis.js';
import { sseEvents } from './sse.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const KEY_A = 'a2a-owner-a-key';
const KEY_B = 'a2a-owner-b-key';
const KEY_OBSERVE = 'a2a-observer-key';

let sim: SimulatedCapsule;
let gw: TestGateway;
let capsule: string;
let base: string;
let ownerATask: { id: string; status: { state: string } };

beforeAll(async () => {
  sim = await startSimulator({ taskAcceptance: 'single' });
  capsule = uniqueCapsule('a2a');
  gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    tuning: { queue: { orphanGraceMs: 100 } },
    config: {
      apiKeys: [
        { sha256: sha(KEY_A), owner: 'owner-a' },
        { sha256: sha(KEY_B), owner: 'owner-b' },
        { sha256: sha(KEY_OBSERVE), owner: 'watcher', scopes: ['observe'] },
      ],
    },
  });
  base = `${gw.baseUrl}/a2a/${capsule}/`;
  // One task run to its end first: the capsule's first records (connected, cold attach) are in the
  // log, and every refusal below must leave it as it is.
  const sent = await post(
    rpc('SendMessage', {
      message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'mine' }], contextId: 'shared-name' },
    }),
  );
  ownerATask = ((await sent.json()) as { result: { task: { id: string; status: { state: string } } } }).result
    .task;
});

afterAll(async () => {
  await gw.close();
  await sim.stop();
});

const post = (
  body: string,
  headers: Record<string, string> = {},
  key: string | null = KEY_A,
  url = base,
): Promise<Response> =>
  fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'a2a-version': '1.0',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...headers,
    },
    body,
  });

const rpc = (method: string, params: unknown, id: number | string = 1): string =>
  JSON.stringify({ jsonrpc: '2.0', id, method, params });

const userMessage = (text: string) => ({
  message: { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text }] },
});

/** Runs `act`, asserts its exact answer, and that the log and the queue did not move. */
const refused = async (
  act: () => Promise<Response>,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<void> => {
  const before = await gw.core.status(capsule);
  const res = await act();
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json');
  for (const [k, v] of Object.entries(headers)) expect(res.headers.get(k)).toBe(v);
  expect(await res.json()).toEqual(body);
  const after = await gw.core.status(capsule);
  expect(after.position).toEqual(before.position);
  expect(after.queue.depth).toBe(0);
};

const err = (id: number | string | null, code: number, message: string) => ({
  jsonrpc: '2.0',
  id,
  error: { code, message },
});

describe('A2A bad input', () => {
  it('JSON-RPC framing errors', async () => {
    await refused(() => post('{nope'), 200, err(null, -32700, 'Parse error'));
    await refused(() => post('[]'), 200, err(null, -32600, 'Invalid Request'));
    await refused(
      () => post(JSON.stringify({ id: 1, method: 'GetTask' })),
      200,
      err(1, -32600, 'Invalid Request'),
    );
    await refused(
      () => post(JSON.stringify({ jsonrpc: '2.0', method: 'GetTask', params: { id: 'x' } })),
      200,
      err(null, -32600, 'Invalid Request'),
    );
    await refused(
      () => post(rpc('GetTask', { id: 'x' }), { 'content-type': 'text/plain' }),
      415,
      err(null, -32600, 'Content-Type must be application/json'),
    );
    await refused(() => post(rpc('GetTask', [1, 2])), 200, err(1, -32602, 'params must be an object'));
  });

  it('unknown methods and versions', async () => {
    await refused(() => post(rpc('Nope', {}, 'a')), 200, err('a', -32601, 'Method not found'));
    // 1.0 names are not 0.3's, and the other way round.
    await refused(
      () => post(rpc('SendMessage', userMessage('x')), { 'a2a-version': '0.3' }),
      200,
      err(1, -32601, 'Method not found'),
    );
    await refused(() => post(rpc('message/send', userMessage('x'))), 200, err(1, -32601, 'Method not found'));
    await refused(
      () => post(rpc('GetTask', { id: 'x' }), { 'a2a-version': '2.0' }),
      200,
      err(1, -32009, 'A2A-Version not supported: this interface offers 1.0 and 0.3'),
    );
  });

  it('the extended card is not configured', async () => {
    await refused(
      () => post(rpc('GetExtendedAgentCard', {})),
      200,
      err(1, -32007, 'Extended agent card is not configured'),
    );
  });

  it('bad params', async () => {
    await refused(
      () => post(rpc('SendMessage', {})),
      200,
      err(1, -32602, 'message: Invalid input: expected object, received undefined'),
    );
    await refused(
      () => post(rpc('SendMessage', { message: { messageId: 'm', role: 'ROLE_USER', parts: [] } })),
      200,
      err(1, -32602, 'message.parts: Too small: expected array to have >=1 items'),
    );
    await refused(
      () =>
        post(rpc('SendMessage', { message: { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'x' }] } })),
      200,
      err(1, -32602, 'message.role must be ROLE_USER'),
    );
    await refused(
      () =>
        post(rpc('SendMessage', { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ data: {} }] } })),
      200,
      err(1, -32005, 'only text parts are supported'),
    );
    await refused(
      () =>
        post(
          rpc('SendMessage', {
            message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }], contextId: 'a b' },
          }),
        ),
      200,
      err(1, -32602, 'message.contextId must be 1 to 128 printable ASCII characters'),
    );
    await refused(
      () => post(rpc('GetTask', {})),
      200,
      err(1, -32602, 'id: Invalid input: expected string, received undefined'),
    );
    await refused(
      () => post(rpc('ListTasks', { pageSize: 0 })),
      200,
      err(1, -32602, 'pageSize must be an integer from 1 to 100'),
    );
    await refused(
      () => post(rpc('SubscribeToTask', { id: 'x' }), { 'last-event-id': 'abc' }),
      200,
      err(1, -32602, 'Last-Event-ID must be an event id this server sent'),
    );
  });

  it("unknown capsules, unknown tasks, another owner's task, credentials", async () => {
    await refused(
      () => post(rpc('GetTask', { id: 'x' }), {}, KEY_A, `${gw.baseUrl}/a2a/no-such-capsule/`),
      404,
      err(null, -32000, 'capsule not found'),
    );
    const card = await fetch(`${gw.baseUrl}/a2a/no-such-capsule/.well-known/agent-card.json`, {
      headers: { authorization: `Bearer ${KEY_A}` },
    });
    expect(card.status).toBe(404);
    expect(await card.json()).toEqual(err(null, -32000, 'capsule not found'));
    await refused(() => post(rpc('GetTask', { id: 'not-a-task' })), 200, err(1, -32001, 'Task not found'));
    await refused(
      () => post(rpc('GetTask', { id: '00000000-0000-4000-8000-000000000000.Y3R4' })),
      200,
      err(1, -32001, 'Task not found'),
    );
    await refused(
      () => post(rpc('GetTask', { id: 'x' }), {}, null),
      401,
      err(null, -32000, 'a valid credential is required (Authorization: Bearer …)'),
    );
    await refused(
      () => post(rpc('GetTask', { id: 'x' }), {}, KEY_OBSERVE),
      403,
      err(null, -32000, 'this credential lacks the "submit" scope'),
    );

    // Owner A's task, finished; owner B names it.
    const task = ownerATask;
    expect(task.status.state).toBe('TASK_STATE_COMPLETED');
    for (const method of ['GetTask', 'CancelTask', 'SubscribeToTask'])
      await refused(
        () => post(rpc(method, { id: task.id }), {}, KEY_B),
        200,
        err(1, -32001, 'Task not found'),
      );
    const list = await post(rpc('ListTasks', {}), {}, KEY_B);
    expect(((await list.json()) as { result: { tasks: unknown[] } }).result.tasks).toEqual([]);
    // Ended: not cancelable, and no subscription (spec §9.4.6).
    await refused(
      () => post(rpc('CancelTask', { id: task.id })),
      200,
      err(1, -32002, 'Task cannot be canceled: it has ended'),
    );
    await refused(
      () => post(rpc('SubscribeToTask', { id: task.id })),
      200,
      err(1, -32004, 'the task has ended: read it with GetTask'),
    );
  });

  it('an oversized body and a path that does not percent-decode', async () => {
    await refused(
      () => post(rpc('SendMessage', userMessage('x'.repeat(1_100_000)))),
      413,
      err(null, -32600, 'request body too large'),
    );
    await refused(
      () => post(rpc('GetTask', { id: 'x' }), {}, KEY_A, `${gw.baseUrl}/a2a/%E0%A4%A/`),
      400,
      err(null, -32600, 'malformed path: a segment does not percent-decode'),
    );
  });

  it('methods a route does not allow', async () => {
    const res = await fetch(base, { headers: { authorization: `Bearer ${KEY_A}` } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect(await res.json()).toEqual(err(null, -32600, 'method not allowed'));
  });
});

describe('A2A 0.3 wire', () => {
  it('no A2A-Version: 0.3 names, kind-tagged events, lower-case states', async () => {
    const res = await post(
      rpc('message/stream', {
        message: {
          kind: 'message',
          messageId: 'm-03',
          role: 'user',
          parts: [{ kind: 'text', text: 'old client' }],
        },
      }),
      { 'a2a-version': '' },
    );
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const events = (await sseEvents(res)).map((e) => (e.data as { result: Record<string, unknown> }).result);
    expect(events[0]).toMatchObject({ kind: 'task', status: { state: 'submitted' } });
    const last = events[events.length - 1];
    expect(last).toMatchObject({ kind: 'status-update', final: true, status: { state: 'completed' } });
    const text = events
      .filter((e) => e.kind === 'artifact-update')
      .map((e) => e.artifact as { artifactId: string; parts: { kind: string; text: string }[] })
      .filter((a) => a.artifactId === 'response')
      .map((a) => a.parts.map((p) => p.text).join(''))
      .join('');
    expect(text).toBe('Echo: old client');
    const got = await post(rpc('tasks/get', { id: events[0]?.id }), { 'a2a-version': '0.3' });
    const task = ((await got.json()) as { result: Record<string, unknown> }).result;
    expect(task).toMatchObject({
      kind: 'task',
      id: events[0]?.id,
      status: { state: 'completed' },
      history: [{ kind: 'message', role: 'user', parts: [{ kind: 'text', text: 'old client' }] }],
    });
  });
});
