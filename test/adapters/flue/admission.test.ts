/**
 * Flue admission rules (§POST): query, content type, JSON, body shape, attachments, uid conditions,
 * idempotency, busy capsules, signal envelopes, public URL and CORS exposure, with exact statuses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFlueClient, FlueExecutionError } from '@flue/sdk';
import { startSimulator } from '../../../src/simulator/index.js';
import { startTestGateway } from '../../support/gateway.js';
import { expectError, startRuleFixture, type RuleFixture } from './rule-fixture.js';

let fx: RuleFixture;
let base: string;
let sim: RuleFixture['sim'];
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fx.post(path, body, headers);

beforeAll(async () => {
  fx = await startRuleFixture();
  ({ base, sim } = fx);
});
afterAll(() => fx.close());

describe('admission', () => {
  it('?wait, content type, JSON and body shape rules', async () => {
    await expectError(await post('/a1?wait=true', { kind: 'user', body: 'x' }), 400, 'invalid_request');
    await expectError(
      await post('/a1', { kind: 'user', body: 'x' }, { 'content-type': 'text/plain' }),
      415,
      'unsupported_media_type',
    );
    await expectError(await post('/a1', '{"kind":'), 400, 'invalid_json');
    await expectError(await post('/a1', '"hello"'), 400, 'invalid_request');
    await expectError(await post('/a1', { body: 'x' }), 400, 'invalid_request');
    await expectError(await post('/a1', { kind: 'user' }), 400, 'invalid_request');
    await expectError(await post('/a1', { kind: 'signal', type: '', body: 'x' }), 400, 'invalid_request');
    await expectError(
      await post('/a1', { kind: 'signal', type: 't', body: 'x', tagName: '1bad' }),
      400,
      'invalid_request',
    );
    await expectError(
      await post('/a1', { kind: 'signal', type: 't', body: 'x', tagName: 'a b' }),
      400,
      'invalid_request',
    );
    await expectError(
      await post('/a1', { kind: 'user', body: 'x', idempotencyKey: 'k'.repeat(257) }),
      400,
      'invalid_request',
    );
    await expectError(
      await post('/a1', { kind: 'user', body: 'x', uid: 'u', initialData: {} }),
      400,
      'invalid_request',
    );
    const oversized = await post('/a1', { kind: 'user', body: 'x'.repeat(5000) });
    await expectError(oversized, 413, 'payload_too_large');
    // None of the refused sends created the conversation.
    await expectError(await fetch(`${base}/a1`), 404, 'stream_not_found');
  });

  it('image attachments are refused: capsules take text only', async () => {
    const image = { type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' };
    const err = await expectError(
      await post('/a2', { kind: 'user', body: 'x', attachments: [image] }),
      400,
      'invalid_request',
    );
    expect(err.details).toContain('text only');
  });

  it('202 admission: body, Location and Stream-Next-Offset', async () => {
    const res = await post('/a3?x=1', { kind: 'user', body: 'hello' });
    expect(res.status).toBe(202);
    const body = (await res.json()) as {
      streamUrl: string;
      offset: string;
      submissionId: string;
      uid: string;
    };
    expect(body.streamUrl).toBe(`${base}/a3`);
    expect(res.headers.get('location')).toBe(body.streamUrl);
    expect(res.headers.get('stream-next-offset')).toBe(body.offset);
    // Reading from the admission offset observes the reply, not the admitted message.
    const chunks = (await (
      await fetch(`${base}/a3?view=updates&offset=${body.offset}&live=long-poll`)
    ).json()) as { type: string }[];
    expect(chunks.map((c) => c.type)).not.toContain('message-appended');
    expect(chunks.map((c) => c.type)).not.toContain('conversation-reset');
  });

  it('uid: null creates only, a string must match', async () => {
    const first = (await (await post('/u1', { kind: 'user', body: 'a', uid: null })).json()) as {
      uid: string;
    };
    const exists = await expectError(
      await post('/u1', { kind: 'user', body: 'b', uid: null }),
      409,
      'agent_instance_exists',
    );
    expect(exists.meta).toEqual({ uid: first.uid });
    await expectError(
      await post('/u1', { kind: 'user', body: 'b', uid: 'uid_other' }),
      404,
      'agent_instance_not_found',
    );
    await expectError(
      await post('/u-none', { kind: 'user', body: 'b', uid: first.uid }),
      404,
      'agent_instance_not_found',
    );
    await sim.idle();
    const ok = await post('/u1', { kind: 'user', body: 'c', uid: first.uid });
    expect(ok.status).toBe(202);
    expect(((await ok.json()) as { uid: string }).uid).toBe(first.uid);
  });

  it('idempotency keys converge on the original submission; a different payload conflicts', async () => {
    const one = (await (await post('/i1', { kind: 'user', body: 'a', idempotencyKey: 'k1' })).json()) as {
      submissionId: string;
    };
    const again = await post('/i1', { kind: 'user', body: 'a', idempotencyKey: 'k1' });
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({
      submissionId: one.submissionId,
      offset: '-1',
      deduplicated: true,
    });
    const viaHeader = await post('/i1', { kind: 'user', body: 'a' }, { 'idempotency-key': 'k1' });
    expect(((await viaHeader.json()) as { submissionId: string }).submissionId).toBe(one.submissionId);
    const conflict = await expectError(
      await post('/i1', { kind: 'user', body: 'b', idempotencyKey: 'k1' }),
      409,
      'submission_conflict',
    );
    expect(conflict.meta).toEqual({ submissionId: one.submissionId });
    await sim.idle();
    const history = (await (await fetch(`${base}/i1`)).json()) as { messages: { role: string }[] };
    expect(history.messages.filter((m) => m.role === 'user')).toHaveLength(1);
  });

  it('a busy capsule: the next message waits its turn and runs after; signals reach the capsule in their envelope', async () => {
    const client = createFlueClient({ url: `${base}/b1` });
    const holding = await client.send({ message: { kind: 'user', body: '#sim {"hold":true}' } });
    const obs = client.observe({ live: 'long-poll' });
    await new Promise<void>((resolve) => {
      const un = obs.subscribe(() => {
        if (obs.getSnapshot().conversation?.messages.some((m) => m.role === 'assistant')) {
          un();
          resolve();
        }
      });
    });
    obs.close();
    // Queued (docs/submission-queue.md): the user message is in the transcript, not settled.
    const next = await client.send({ message: { kind: 'user', body: 'second' } });
    const waiting = await client.history();
    expect(waiting.messages.filter((m) => m.role === 'user').map((m) => m.parts)).toHaveLength(2);
    expect(waiting.settlements.map((s) => s.submissionId)).not.toContain(next.submissionId);
    // The holding task ends (canceled on the capsule): the queued one runs.
    // The holding task wrote the capsule's last frame ("inference turn 1", then nothing).
    const running = sim.written.map((w) => JSON.parse(w.data) as { id?: string }).findLast((d) => d.id)?.id;
    expect(running).toBeDefined();
    await fetch(sim.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { id: running } }),
    });
    const error = await client.wait(holding).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(FlueExecutionError);
    expect((await client.read(next)).text).toBe('Echo: second');
    const signal = await client.send({
      message: { kind: 'signal', type: 'deploy', body: 'done', tagName: 'ci', attributes: { env: 'prod' } },
    });
    const reply = await client.read(signal);
    expect(reply.text).toBe('Echo: <ci type="deploy" env="prod">done</ci>');
  });
});

describe('public URL', () => {
  it('streamUrl and Location use --public-url when configured', async () => {
    const sim2 = await startSimulator();
    const gw2 = await startTestGateway({
      capsules: { cap: sim2.url },
      config: { publicUrl: 'https://gw.example.com/' },
    });
    try {
      const res = await fetch(`${gw2.baseUrl}/flue/cap/p1?trace=1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'user', body: 'x' }),
      });
      expect(res.status).toBe(202);
      expect(((await res.json()) as { streamUrl: string }).streamUrl).toBe(
        'https://gw.example.com/flue/cap/p1',
      );
      expect(res.headers.get('location')).toBe('https://gw.example.com/flue/cap/p1');
      await sim2.idle();
    } finally {
      await gw2.close();
      await sim2.stop();
    }
  });
});

describe('browsers', () => {
  it('CORS for configured origins exposes the coordination headers on Flue responses', async () => {
    const sim3 = await startSimulator();
    const gw3 = await startTestGateway({
      capsules: { cap: sim3.url },
      config: { corsOrigins: ['https://app.example'] },
    });
    try {
      const res = await fetch(`${gw3.baseUrl}/flue/cap/never`, {
        headers: { origin: 'https://app.example' },
      });
      expect(res.status).toBe(404);
      expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
      const exposed = (res.headers.get('access-control-expose-headers') ?? '').toLowerCase();
      for (const h of ['stream-next-offset', 'stream-up-to-date', 'stream-cursor', 'location'])
        expect(exposed).toContain(h);
    } finally {
      await gw3.close();
      await sim3.stop();
    }
  });
});
