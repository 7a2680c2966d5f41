// Each release line's wire differences (docs/release-lines.md "Telling the lines apart",
// "What the gateway does on each line", "Door tokens"), checked over raw HTTP against the simulator.
import { describe, expect, it } from 'vitest';
import { JSON_CT, messageBody, post, rawRequest, rpc, type RawResponse } from './raw-client.js';
import { useSimulators, watch } from './support.js';

const start = useSimulators();

/** Send and read a whole (non-streaming) response. */
const exchange = async (
  port: number,
  req: { body?: string; headers?: Record<string, string>; path?: string; method?: string },
): Promise<RawResponse> => {
  const res = rawRequest(port, { headers: JSON_CT, ...req });
  await res.waitFor(
    () => res.status > 0 && res.body.length >= Number(res.header('content-length') ?? 0),
    'response',
  );
  res.close();
  return res;
};

const card = async (port: number): Promise<Record<string, unknown>> => {
  const res = await exchange(port, { method: 'GET', path: '/.well-known/agent-card.json', headers: {} });
  expect(res.status).toBe(200);
  return JSON.parse(res.body) as Record<string, unknown>;
};

const finalOf = (res: RawResponse): boolean =>
  res.frames.some(
    (f) => f.event === 'status' && (JSON.parse(f.data ?? '{}') as { final?: boolean }).final === true,
  );

describe('agent card per line', () => {
  it('spec: no supportedInterfaces, no serves, top-level session_id', async () => {
    const c = await start();
    const body = await card(c.port);
    expect(body.version).toBe('0.3.7');
    expect(body.session_id).toBe(c.sessionId);
    expect(body).not.toHaveProperty('serves');
    expect(body).not.toHaveProperty('supportedInterfaces');
  });

  it('0.4: a serves block, top-level session_id and capabilities.cancellation', async () => {
    const c = await start({ release: '0.4' });
    const body = await card(c.port);
    expect(body.version).toBe('0.4.2');
    expect(body.session_id).toBe(c.sessionId);
    expect(body.serves).toEqual({
      'stream/watch': true,
      'message/stream': true,
      'tasks/cancel': true,
      'tasks/get': true,
    });
    expect(body.capabilities).toEqual({ streaming: true, cancellation: true });
    expect(body).not.toHaveProperty('supportedInterfaces');
  });

  it('0.5: interface protocolVersion 0.3, session id in params.sessionId, no stream extension', async () => {
    const c = await start({ release: '0.5' });
    const body = await card(c.port);
    expect(body.version).toBe('0.5.1');
    expect(body).not.toHaveProperty('session_id');
    expect(body.supportedInterfaces).toEqual([
      { url: c.url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ]);
    expect(body.capabilities).toEqual({
      streaming: true,
      extensions: [{ uri: 'https://murmur.dev/a2a/capsule/v1', params: { sessionId: c.sessionId } }],
    });
  });

  it('0.6: also lists the #murmur-stream-v1 extension', async () => {
    const c = await start({ release: '0.6' });
    const body = await card(c.port);
    expect(body.version).toBe('0.6.0');
    const exts = (body.capabilities as { extensions: { uri: string }[] }).extensions.map((e) => e.uri);
    expect(exts).toEqual([
      'https://murmur.dev/a2a/capsule/v1',
      'https://murmur.dev/a2a/ext#murmur-stream-v1',
    ]);
  });

  it('1.0: interface protocolVersion 1.0', async () => {
    const c = await start({ release: '1.0' });
    const body = await card(c.port);
    expect((body.supportedInterfaces as { protocolVersion: string }[])[0]?.protocolVersion).toBe('1.0');
  });

  it('0.5+ authenticated door: the public card has no session id, the extended card (with token) does', async () => {
    const c = await start({ release: '0.5', doorToken: 'tok' });
    const body = await card(c.port);
    expect(body.capabilities).toEqual({
      streaming: true,
      extensions: [{ uri: 'https://murmur.dev/a2a/capsule/v1', params: {} }],
    });
    const refused = await exchange(c.port, { body: rpc('agent/getAuthenticatedExtendedCard') });
    expect(refused.status).toBe(401);
    const ext = await exchange(c.port, {
      body: rpc('agent/getAuthenticatedExtendedCard'),
      headers: { ...JSON_CT, authorization: 'Bearer tok' },
    });
    expect(ext.status).toBe(200);
    const result = (JSON.parse(ext.body) as { result: { capabilities: unknown } }).result;
    expect(result.capabilities).toEqual({
      streaming: true,
      extensions: [{ uri: 'https://murmur.dev/a2a/capsule/v1', params: { sessionId: c.sessionId } }],
    });
  });
});

describe('0.4+: one id sequence per session', () => {
  it('ids run from 1, strictly ascending, across tasks', async () => {
    const c = await start({ release: '0.4' });
    const w = await watch(c.port);
    await c.submit('one').done;
    await c.submit('two').done;
    const total = c.written.filter((f) => f.id !== null).length;
    await w.waitFor(() => w.frames.length >= total + 1, 'both tasks');
    const ids = w.frames.filter((f) => f.event !== 'connection-ack').map((f) => Number(f.id));
    expect(ids[0]).toBe(1);
    expect(ids).toEqual(ids.map((_, i) => i + 1));
    w.close();
  });

  it('rejected has no id line', async () => {
    const c = await start({ release: '0.4' });
    c.submit('#sim {"hold":true}');
    const second = post(c.port, messageBody('two'));
    await second.waitFor(
      () => second.frames.some((f) => f.data?.includes('"rejected"') === true),
      'rejected',
    );
    const rejected = second.frames.find((f) => f.data?.includes('"rejected"') === true);
    expect(rejected?.event).toBe('status');
    expect(rejected?.id).toBeUndefined();
    expect(rejected?.raw).not.toMatch(/^id:/m);
    second.close();
  });

  it('replay from Last-Event-ID N gives exactly the ids above N, no gap', async () => {
    const c = await start({ release: '0.4' });
    await c.submit('hello').done;
    const last = Number(c.written.filter((f) => f.id !== null).at(-1)?.id);
    const w = await watch(c.port, { 'last-event-id': '2' });
    await w.waitFor(() => w.frames.length >= last - 1, 'replay');
    const ids = w.frames
      .filter((f) => f.event !== 'connection-ack')
      .map((f) => (f.event === 'gap' ? 'gap' : Number(f.id)));
    expect(ids).toEqual(Array.from({ length: last - 2 }, (_, i) => i + 3));
    w.close();
  });

  it('a cursor from an earlier session (>= next id) gets gap', async () => {
    const c = await start({ release: '0.4' });
    await c.submit('a b c d e f g').done;
    await c.submit('h i j k').done;
    const old = Number(c.written.filter((f) => f.id !== null).at(-1)?.id);
    await c.restart();
    await c.submit('x').done;
    const next = Number(c.written.filter((f) => f.session === c.session && f.id !== null).at(-1)?.id) + 1;
    expect(old).toBeGreaterThanOrEqual(next);
    const w = await watch(c.port, { 'last-event-id': String(old) });
    await w.waitFor(() => w.frames.some((f) => f.event === 'gap'), 'gap');
    expect(w.frames[1]?.event).toBe('gap');
    w.close();
  });

  it('spec line: per-task counters (every task starts at id 0)', async () => {
    const c = await start();
    await c.submit('one').done;
    await c.submit('two').done;
    const firstStatus = c.written.filter((f) => f.event === 'status' && f.data.includes('"working"'));
    expect(firstStatus.map((f) => f.id).slice(0, 2)).toEqual(['0', '0']);
  });
});

describe('0.5+: door auth', () => {
  it('two Authorization headers → 401 with a JSON {error,message} body', async () => {
    const c = await start({ release: '0.5', doorToken: 'tok' });
    const res = rawRequest(c.port, {
      body: rpc('stream/watch'),
      headers: { ...JSON_CT, authorization: 'Bearer tok', Authorization: 'Bearer tok' },
    });
    await res.waitFor(
      () => res.status > 0 && res.body.length >= Number(res.header('content-length') ?? 0),
      'response',
    );
    res.close();
    expect(res.status).toBe(401);
    expect(Object.keys(JSON.parse(res.body) as object).sort()).toEqual(['error', 'message']);
  });

  it('a restart mints a new door token; the old one is refused', async () => {
    const c = await start({ release: '0.5', doorToken: 'tok' });
    await c.restart();
    expect(c.doorToken).not.toBe('tok');
    expect(c.doorToken).not.toBeNull();
    const old = await exchange(c.port, {
      body: rpc('stream/watch'),
      headers: { ...JSON_CT, authorization: 'Bearer tok' },
    });
    expect(old.status).toBe(401);
    const fresh = await watch(c.port, { authorization: `Bearer ${c.doorToken ?? ''}` });
    expect(fresh.status).toBe(200);
    fresh.close();
  });
});

describe('0.5+: finals', () => {
  it('message/stream closes on its own task final only (spec: on any task final)', async () => {
    const c = await start({ release: '0.5', taskAcceptance: 'queue' });
    const first = post(c.port, messageBody('first'));
    const second = post(c.port, messageBody('second'));
    await first.ended();
    expect(second.closed).toBe(false);
    await second.ended();
    expect(finalOf(second)).toBe(true);
  });
});

describe('0.6: tool-call frames', () => {
  it('tool-call-started and tool-call-progress, with ids, before the artifact', async () => {
    const c = await start({ release: '0.6' });
    const s = post(c.port, messageBody('#sim {"tools":1,"turns":2}'));
    await s.ended();
    const names = s.frames.map((f) => f.event);
    const started = names.indexOf('tool-call-started');
    const progress = names.indexOf('tool-call-progress');
    const artifact = names.indexOf('artifact');
    expect(started).toBeGreaterThan(0);
    expect(progress).toBeGreaterThan(started);
    expect(artifact).toBeGreaterThan(progress);
    expect(s.frames[started]?.id).toMatch(/^\d+$/);
    expect(s.frames[progress]?.id).toMatch(/^\d+$/);
  });
});

describe('1.0: A2A 1.0 names and the A2A-Version header', () => {
  it('stream/watch without A2A-Version → JSON-RPC -32009', async () => {
    const c = await start({ release: '1.0' });
    const res = await exchange(c.port, { body: rpc('stream/watch', {}, 3) });
    expect(JSON.parse(res.body)).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: { code: -32009, message: 'Version not supported' },
    });
  });

  it('SendStreamingMessage with A2A-Version 1.0 and ROLE_USER streams a task', async () => {
    const c = await start({ release: '1.0' });
    const s = post(
      c.port,
      rpc('SendStreamingMessage', {
        message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'hi' }] },
      }),
      { 'A2A-Version': '1.0' },
    );
    await s.ended();
    expect(s.status).toBe(200);
    expect(finalOf(s)).toBe(true);
  });
});
