/**
 * Every bad push notification config gets its exact A2A error (status and body) and changes
 * nothing: no config stored, nothing appended to the log or queued. Webhook URLs against the SSRF
 * policy (loopback refused here, one loopback host admitted by `allowHosts`), the bounds per task
 * and per owner, another owner's task, unknown configs, an ended task; both wires.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { uniqueCapsule } from '../../support/redis.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const KEY_A = 'a2a-push-owner-a';
const KEY_B = 'a2a-push-owner-b';
/** Admitted by `allowHosts` though loopback; nothing listens there (deliveries fail and retry). */
const ADMITTED = 'http://127.0.0.2:9/hook';
const LOOPBACK_OFF = 'a2a.pushNotifications.webhooks.allowLoopback is off';

let sim: SimulatedCapsule;
let gw: TestGateway;
let base: string;
let capsule: string;
/** Owner A: an ended task, a running (held) one, two queued; owner B: one queued. */
const tasks = { ended: '', running: '', queued1: '', queued2: '', ofB: '' };

const post = (method: string, params: unknown, key = KEY_A, version = '1.0'): Promise<Response> =>
  fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': version, authorization: `Bearer ${key}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });

const send = async (text: string, key = KEY_A, returnImmediately = true): Promise<string> => {
  const res = await post(
    'SendMessage',
    {
      message: { messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ text }] },
      configuration: { returnImmediately },
    },
    key,
  );
  return ((await res.json()) as { result: { task: { id: string } } }).result.task.id;
};

const configsOf = async (taskId: string, key = KEY_A): Promise<string[]> => {
  const res = await post('ListTaskPushNotificationConfigs', { taskId }, key);
  return ((await res.json()) as { result: { configs: { id: string }[] } }).result.configs.map((c) => c.id);
};

const err = (code: number, message: string) => ({ jsonrpc: '2.0', id: 1, error: { code, message } });

/** The exact answer, and neither the log, the queue nor owner A's configs moved. */
const refused = async (act: () => Promise<Response>, body: unknown): Promise<void> => {
  const before = await gw.core.status(capsule);
  const configs = await Promise.all([tasks.running, tasks.queued1, tasks.queued2].map((t) => configsOf(t)));
  const res = await act();
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual(body);
  const after = await gw.core.status(capsule);
  expect(after.position).toEqual(before.position);
  expect(after.queue.depth).toBe(before.queue.depth);
  expect(await Promise.all([tasks.running, tasks.queued1, tasks.queued2].map((t) => configsOf(t)))).toEqual(
    configs,
  );
};

beforeAll(async () => {
  sim = await startSimulator({ taskAcceptance: 'single' });
  capsule = uniqueCapsule('a2a-push-bad');
  gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    config: {
      apiKeys: [
        { sha256: sha(KEY_A), owner: 'owner-a' },
        { sha256: sha(KEY_B), owner: 'owner-b' },
      ],
    },
    extra: {
      a2a: {
        pushNotifications: {
          maxConfigsPerTask: 2,
          maxTasksPerOwner: 2,
          webhooks: { allowLoopback: false, allowHosts: ['127.0.0.2'], timeoutMs: 5000 },
        },
      },
    },
  });
  base = `${gw.baseUrl}/a2a/${capsule}/`;
  tasks.ended = await send('done', KEY_A, false);
  tasks.running = await send('#sim {"hold":true}');
  tasks.queued1 = await send('queued one');
  tasks.queued2 = await send('queued two');
  tasks.ofB = await send('queued of b', KEY_B);
});

afterAll(async () => {
  await gw.close();
  await sim.stop();
});

describe('A2A push notification configs: bad input', () => {
  it('webhook URLs the SSRF policy refuses', async () => {
    const cases: [string, string][] = [
      ['http://127.0.0.1:9/hook', `url is a loopback address (${LOOPBACK_OFF})`],
      ['http://localhost/hook', `url is a loopback address (${LOOPBACK_OFF})`],
      ['http://[::1]/hook', `url is a loopback address (${LOOPBACK_OFF})`],
      ['http://10.0.0.1/hook', 'url is a private, link-local or internal address'],
      ['http://192.168.1.10/hook', 'url is a private, link-local or internal address'],
      ['http://169.254.169.254/latest/meta-data', 'url is a private, link-local or internal address'],
      ['http://[fd00::1]/hook', 'url is a private, link-local or internal address'],
      ['http://[::ffff:10.0.0.1]/hook', 'url is a private, link-local or internal address'],
      ['ftp://127.0.0.2/hook', 'url must be http or https'],
      ['http://user:pw@127.0.0.2/hook', 'url must not carry credentials'],
      ['not a url', 'url is not a URL'],
    ];
    for (const [url, message] of cases)
      await refused(
        () => post('CreateTaskPushNotificationConfig', { taskId: tasks.running, url }),
        err(-32602, message),
      );
    // Inline in SendMessage: refused before anything is recorded or queued.
    await refused(
      () =>
        post('SendMessage', {
          message: { messageId: 'm-x', role: 'ROLE_USER', parts: [{ text: 'x' }] },
          configuration: { taskPushNotificationConfig: { url: 'http://10.0.0.1/hook' } },
        }),
      err(
        -32602,
        'configuration.taskPushNotificationConfig.url is a private, link-local or internal address',
      ),
    );
    // The 0.3 wire names its own fields.
    await refused(
      () =>
        post(
          'tasks/pushNotificationConfig/set',
          { taskId: tasks.running, pushNotificationConfig: { url: 'http://127.0.0.1/hook' } },
          KEY_A,
          '0.3',
        ),
      err(-32602, `pushNotificationConfig.url is a loopback address (${LOOPBACK_OFF})`),
    );
    await refused(
      () =>
        post(
          'message/send',
          {
            message: {
              kind: 'message',
              messageId: 'm-y',
              role: 'user',
              parts: [{ kind: 'text', text: 'y' }],
            },
            configuration: { pushNotificationConfig: { url: 'http://169.254.169.254/' } },
          },
          KEY_A,
          '0.3',
        ),
      err(-32602, 'configuration.pushNotificationConfig.url is a private, link-local or internal address'),
    );
  });

  it('params missing or mistyped', async () => {
    await refused(
      () => post('CreateTaskPushNotificationConfig', { taskId: tasks.running }),
      err(-32602, 'url: Invalid input: expected string, received undefined'),
    );
    await refused(
      () => post('CreateTaskPushNotificationConfig', { url: ADMITTED }),
      err(-32602, 'taskId: Invalid input: expected string, received undefined'),
    );
    await refused(
      () =>
        post('CreateTaskPushNotificationConfig', {
          taskId: tasks.running,
          url: ADMITTED,
          authentication: { scheme: 'Bear er', credentials: 'x' },
        }),
      err(-32602, 'authentication.scheme: must be an HTTP auth scheme name'),
    );
    await refused(
      () =>
        post(
          'tasks/pushNotificationConfig/set',
          {
            taskId: tasks.running,
            pushNotificationConfig: { url: ADMITTED, authentication: { schemes: [] } },
          },
          KEY_A,
          '0.3',
        ),
      err(
        -32602,
        'pushNotificationConfig.authentication.schemes: Too small: expected array to have >=1 items',
      ),
    );
    await refused(
      () => post('GetTaskPushNotificationConfig', { taskId: tasks.running }),
      err(-32602, 'id: Invalid input: expected string, received undefined'),
    );
    await refused(
      () => post('tasks/pushNotificationConfig/delete', { id: tasks.running }, KEY_A, '0.3'),
      err(-32602, 'pushNotificationConfigId: Invalid input: expected string, received undefined'),
    );
  });

  it("unknown tasks, another owner's task, unknown configs, an ended task", async () => {
    await refused(
      () => post('CreateTaskPushNotificationConfig', { taskId: 'nope', url: ADMITTED }),
      err(-32001, 'Task not found'),
    );
    await refused(
      () => post('CreateTaskPushNotificationConfig', { taskId: tasks.running, url: ADMITTED }, KEY_B),
      err(-32001, 'Task not found'),
    );
    await refused(
      () => post('ListTaskPushNotificationConfigs', { taskId: tasks.running }, KEY_B),
      err(-32001, 'Task not found'),
    );
    await refused(
      () => post('GetTaskPushNotificationConfig', { taskId: tasks.running, id: 'no-such' }),
      err(-32001, 'Push notification config not found'),
    );
    await refused(
      () => post('DeleteTaskPushNotificationConfig', { taskId: tasks.running, id: 'no-such' }),
      err(-32001, 'Push notification config not found'),
    );
    await refused(
      () => post('CreateTaskPushNotificationConfig', { taskId: tasks.ended, url: ADMITTED }),
      err(-32004, 'the task has ended: it has no updates left to notify'),
    );
  });

  it('bounded per task and per owner', async () => {
    const create = (taskId: string, id: string, key = KEY_A) =>
      post('CreateTaskPushNotificationConfig', { taskId, id, url: ADMITTED }, key);
    expect((await (await create(tasks.running, 'a')).json()) as object).toHaveProperty('result.id', 'a');
    expect((await (await create(tasks.running, 'b')).json()) as object).toHaveProperty('result.id', 'b');
    await refused(
      () => create(tasks.running, 'c'),
      err(-32000, 'this task has 2 push notification configs already'),
    );
    // Setting an existing id again replaces it: no new config.
    expect((await (await create(tasks.running, 'b')).json()) as object).toHaveProperty('result.id', 'b');
    expect(await configsOf(tasks.running)).toEqual(['a', 'b']);
    expect((await (await create(tasks.queued1, 'a')).json()) as object).toHaveProperty('result.id', 'a');
    await refused(
      () => create(tasks.queued2, 'a'),
      err(-32000, 'this owner has push notification configs on 2 tasks already'),
    );
    await refused(
      () =>
        post('SendMessage', {
          message: { messageId: 'm-z', role: 'ROLE_USER', parts: [{ text: 'z' }] },
          configuration: { returnImmediately: true, taskPushNotificationConfig: { url: ADMITTED } },
        }),
      err(-32000, 'this owner has push notification configs on 2 tasks already'),
    );
    // Another owner has a share of its own.
    expect((await (await create(tasks.ofB, 'a', KEY_B)).json()) as object).toHaveProperty('result.id', 'a');
    // A deleted config frees its place; the task's last one frees the owner's.
    await post('DeleteTaskPushNotificationConfig', { taskId: tasks.queued1, id: 'a' });
    expect((await (await create(tasks.queued2, 'a')).json()) as object).toHaveProperty('result.id', 'a');
  });
});
