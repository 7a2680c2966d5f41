/**
 * Black-box conformance: the official `@flue/sdk` client, unchanged, against the gateway in front of
 * simulated capsules. send → wait → read, observe over SSE and long-poll reaching history(), failed
 * tasks, abort.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createFlueClient, FlueExecutionError } from '@flue/sdk';
import { testRedisUrl, uniqueCapsule } from '../../support/redis.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestGateway } from '../../support/gateway.js';
import { stopAfterTest } from '../../support/stop-after-test.js';

let redisUrl: string | undefined;

const setup = async (config: Parameters<typeof startTestGateway>[0]['config'] = {}) => {
  const sim = await startSimulator({ taskAcceptance: 'single' });
  stopAfterTest(sim);
  // A unique capsule id per test keeps Redis-backed runs apart.
  const capsule = uniqueCapsule('flue');
  const gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    config,
    ...(redisUrl ? { redisUrl } : {}),
  });
  stopAfterTest(gw);
  return { sim, gw, url: (conv: string) => `${gw.baseUrl}/flue/${capsule}/${conv}` };
};

type Observation = ReturnType<ReturnType<typeof createFlueClient>['observe']>;

/** Resolve when the observation's state satisfies `done` (event-driven, via subscribe). */
const until = (obs: Observation, done: (s: ReturnType<Observation['getSnapshot']>) => boolean) =>
  new Promise<ReturnType<Observation['getSnapshot']>>((resolve) => {
    const check = () => {
      const s = obs.getSnapshot();
      if (done(s)) {
        unsubscribe();
        resolve(s);
      }
    };
    const unsubscribe = obs.subscribe(check);
    check();
  });

describe.each(['memory', 'redis'] as const)('@flue/sdk against the gateway (%s store)', (store) => {
  beforeAll(() => {
    redisUrl = store === 'redis' ? testRedisUrl() : undefined;
    if (store === 'redis' && !redisUrl && process.env.REQUIRE_REDIS === '1')
      throw new Error('Redis required');
  });

  it('send → wait → read returns the capsule reply', async () => {
    const { url } = await setup();
    const client = createFlueClient({ url: url('conv-a') });
    const admission = await client.send({ message: { kind: 'user', body: 'hello there' } });
    expect(admission.streamUrl).toBe(url('conv-a'));
    expect(admission.submissionId).toMatch(/^sub_/);
    expect(admission.uid).toMatch(/^uid_/);
    await client.wait(admission);
    const reply = await client.read(admission);
    expect(reply.text).toBe('Echo: hello there');
    const history = await client.history();
    expect(history.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(history.settlements).toEqual([{ submissionId: admission.submissionId, outcome: 'completed' }]);
  });

  for (const live of ['sse', 'long-poll'] as const) {
    it(`observe({live: '${live}'}) reaches the same state as history()`, async () => {
      const { url } = await setup({ idleControlMs: 500, longPollMaxMs: 500 });
      const client = createFlueClient({ url: url(`conv-${live}`) });
      const first = await client.send({ message: { kind: 'user', body: 'one' } });
      await client.wait(first);
      const obs = client.observe({ live });
      try {
        await until(obs, (s) => s.phase === 'live');
        const second = await client.send({
          message: { kind: 'user', body: '#sim {"chunks":5,"thinking":2,"tools":2,"turns":2}' },
        });
        const third = await client.send({
          message: { kind: 'signal', type: 'ping', body: '{"n":1}', tagName: 'ping' },
        });
        await client.wait(second).catch(() => undefined);
        await client.wait(third).catch(() => undefined);
        const history = await client.history();
        const state = await until(
          obs,
          (s) => (s.conversation?.settlements.length ?? 0) === history.settlements.length,
        );
        expect(state.conversation?.messages).toEqual(history.messages);
        expect(state.conversation?.settlements).toEqual(history.settlements);
        expect(history.messages.filter((m) => m.role === 'assistant').length).toBeGreaterThanOrEqual(2);
      } finally {
        obs.close();
      }
    });
  }

  it('a failed task makes wait throw the execution error', async () => {
    const { url } = await setup();
    const client = createFlueClient({ url: url('conv-fail') });
    const admission = await client.send({
      message: { kind: 'user', body: '#sim {"fail":"driver exploded"}' },
    });
    const error = await client.wait(admission).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(FlueExecutionError);
    expect((error as FlueExecutionError).failure).toBe('failed');
    expect((error as Error).message).toContain('driver exploded');
  });

  it('abort cancels the running task and the submission settles aborted', async () => {
    const { url } = await setup();
    const client = createFlueClient({ url: url('conv-abort') });
    const admission = await client.send({ message: { kind: 'user', body: '#sim {"hold":true}' } });
    // The task must have started (its first frame logged) before abort can name it.
    const obs = client.observe({ live: 'long-poll' });
    await until(obs, (s) => s.conversation?.messages.some((m) => m.role === 'assistant') ?? false);
    obs.close();
    expect(await client.abort()).toEqual({ aborted: true });
    const error = await client.wait(admission).then(
      () => null,
      (e: unknown) => e,
    );
    expect((error as FlueExecutionError).failure).toBe('aborted');
    const history = await client.history();
    expect(history.settlements[0]).toMatchObject({
      submissionId: admission.submissionId,
      outcome: 'aborted',
    });
    expect(await client.abort()).toEqual({ aborted: false });
  });
});
