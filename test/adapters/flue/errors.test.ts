/**
 * Every validation and error rule of the Flue surface, with exact status, error type and headers,
 * against the gateway in front of a simulated capsule (raw fetch, no SDK).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFlueClient, FlueExecutionError } from '@flue/sdk';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';

let sim: SimulatedCapsule;
let gw: TestGateway;
let base: string;

beforeAll(async () => {
  sim = await startSimulator();
  gw = await startTestGateway({
    capsules: { cap: sim.url },
    config: { longPollMaxMs: 200, idleControlMs: 150, heartbeatMs: 100, bodyLimitBytes: 4096 },
  });
  base = `${gw.baseUrl}/flue/cap`;
});
afterAll(async () => {
  await gw.close();
  await sim.stop();
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

/** Assert a Flue error envelope with the fixed headers. */
const expectError = async (res: Response, status: number, type: string) => {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json');
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  expect(res.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
  const body = (await res.json()) as {
    error: { type: string; message: string; details: string; meta?: Record<string, unknown> };
  };
  expect(body.error.type).toBe(type);
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.details).toBe('string');
  return body.error;
};

/** A conversation with one completed message; returns its admission. */
const created = async (conv: string) => {
  const client = createFlueClient({ url: `${base}/${conv}` });
  const admission = await client.send({ message: { kind: 'user', body: 'hi' } });
  await client.wait(admission);
  return admission;
};

describe('routing, ids and methods', () => {
  it('unknown capsule → 404 stream_not_found on every route', async () => {
    await expectError(await fetch(`${gw.baseUrl}/flue/nope/c1`), 404, 'stream_not_found');
    await expectError(
      await fetch(`${gw.baseUrl}/flue/nope/c1`, { method: 'POST', body: '{}' }),
      404,
      'stream_not_found',
    );
    await expectError(
      await fetch(`${gw.baseUrl}/flue/nope/c1/abort`, { method: 'POST' }),
      404,
      'stream_not_found',
    );
  });

  it('empty or whitespace conversation id → 400 invalid_request', async () => {
    await expectError(await fetch(`${base}/%20%20`), 400, 'invalid_request');
    await expectError(await fetch(`${base}/`), 400, 'invalid_request');
    await expectError(await fetch(base), 400, 'invalid_request');
  });

  it('methods a route does not allow → 405 method_not_allowed with Allow', async () => {
    const put = await fetch(`${base}/c1`, { method: 'PUT' });
    expect(put.headers.get('allow')).toBe('GET, HEAD, POST');
    await expectError(put, 405, 'method_not_allowed');
    const abort = await fetch(`${base}/c1/abort`);
    expect(abort.headers.get('allow')).toBe('POST');
    await expectError(abort, 405, 'method_not_allowed');
    const att = await fetch(`${base}/c1/attachments/a1`, { method: 'DELETE' });
    expect(att.headers.get('allow')).toBe('GET');
    await expectError(att, 405, 'method_not_allowed');
  });
});

describe('reads', () => {
  it('a conversation that never received a message → 404 stream_not_found on every read route', async () => {
    await expectError(await fetch(`${base}/never`), 404, 'stream_not_found');
    await expectError(await fetch(`${base}/never?view=updates&offset=-1`), 404, 'stream_not_found');
    await expectError(await fetch(`${base}/never/attachments/x`), 404, 'stream_not_found');
    const head = await fetch(`${base}/never`, { method: 'HEAD' });
    expect(head.status).toBe(404);
    expect(head.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await head.text()).toBe('');
  });

  it('bad query combinations → 400 invalid_request', async () => {
    await created('q1');
    const bad = [
      'view=bogus',
      'view=history&view=history',
      'view=history&offset=-1',
      'offset=-1',
      'live=sse',
      'tail=5',
      'view=updates',
      'view=updates&offset=-1&offset=-1',
      'view=updates&offset=abc',
      'view=updates&offset=1',
      'view=updates&offset=0_0',
      'view=updates&offset=00000000000000001_0000000000000000',
      'view=updates&offset=-1&live=stream',
      'view=updates&offset=-1&live=sse&live=sse',
      'view=updates&offset=-1&tail=3',
    ];
    for (const q of bad) await expectError(await fetch(`${base}/q1?${q}`), 400, 'invalid_request');
  });

  it('an offset beyond the head or from another epoch → 416 stream_offset_gone', async () => {
    const admission = await created('q2');
    const [epoch] = admission.offset.split('_');
    await expectError(
      await fetch(`${base}/q2?view=updates&offset=${epoch}_9999999999999999`),
      416,
      'stream_offset_gone',
    );
    const other = String(Number(epoch) + 1).padStart(16, '0');
    await expectError(
      await fetch(`${base}/q2?view=updates&offset=${other}_0000000000000001`),
      416,
      'stream_offset_gone',
    );
  });

  it('history, HEAD and updates carry the spec headers; -1 begins with a conversation-reset', async () => {
    await created('q3');
    const history = await fetch(`${base}/q3`);
    expect(history.status).toBe(200);
    expect(history.headers.get('cache-control')).toBe('no-store');
    expect(history.headers.get('stream-up-to-date')).toBe('true');
    expect(history.headers.get('x-content-type-options')).toBe('nosniff');
    expect(history.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    const snap = (await history.json()) as { offset: string; v: number };
    expect(history.headers.get('stream-next-offset')).toBe(snap.offset);
    expect(snap.v).toBe(1);
    const head = await fetch(`${base}/q3`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('application/json');
    expect(head.headers.get('stream-up-to-date')).toBe('true');
    expect(head.headers.get('stream-next-offset')).toMatch(/^\d{16}_\d{16}$/);
    const updates = await fetch(`${base}/q3?view=updates&offset=-1`);
    expect(updates.headers.get('cache-control')).toBe('no-store');
    const chunks = (await updates.json()) as { type: string }[];
    expect(chunks[0]?.type).toBe('conversation-reset');
    const att = await fetch(`${base}/q3/attachments/${encodeURIComponent('a/1')}`);
    await expectError(att, 404, 'attachment_not_found');
  });

  it('long-poll at the head answers [] up to date with the offset after the window', async () => {
    await created('q4');
    const snap = (await (await fetch(`${base}/q4`)).json()) as { offset: string };
    const res = await fetch(`${base}/q4?view=updates&offset=${snap.offset}&live=long-poll`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([]);
    expect(res.headers.get('stream-up-to-date')).toBe('true');
    expect(res.headers.get('stream-next-offset')).toBe(snap.offset);
  });

  it('a parked long-poll whose client leaves does not disturb the next one', async () => {
    await created('q5');
    const snap = (await (await fetch(`${base}/q5`)).json()) as { offset: string };
    const gone = new AbortController();
    const parked = fetch(`${base}/q5?view=updates&offset=${snap.offset}&live=long-poll`, {
      signal: gone.signal,
    });
    gone.abort();
    await expect(parked).rejects.toThrow();
    const res = await fetch(`${base}/q5?view=updates&offset=${snap.offset}&live=long-poll`);
    expect(res.status).toBe(200);
  });

  it('SSE: headers, idle upToDate control and heartbeat comments', async () => {
    await created('q6');
    const snap = (await (await fetch(`${base}/q6`)).json()) as { offset: string };
    const stop = new AbortController();
    const res = await fetch(`${base}/q6?view=updates&offset=${snap.offset}&live=sse`, {
      signal: stop.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Bounded: read until both an idle control and a heartbeat arrived (intervals are 150/100 ms).
    for (let i = 0; i < 100 && !(text.includes('event: control') && text.includes(': heartbeat')); i++)
      text += decoder.decode((await reader.read()).value);
    stop.abort();
    expect(text).toContain(`event: control\ndata:{"streamNextOffset":"${snap.offset}","upToDate":true}\n\n`);
    expect(text).toContain(': heartbeat\n\n');
  });
});

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

  it('a busy capsule: the admitted message settles failed; signals reach the capsule in their envelope', async () => {
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
    const busy = await client.send({ message: { kind: 'user', body: 'second' } });
    const error = await client.wait(busy).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(FlueExecutionError);
    expect((error as Error).message).toContain('busy');
    await client.abort();
    await client.wait(holding).catch(() => undefined);
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
