// The capsule's door over raw HTTP: the 404 rule, exact headers, JSON-RPC answers, door token,
// params errors, tasks/get and tasks/cancel.
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule, type SimulatorOptions } from '../../src/simulator/index.js';
import { JSON_CT, messageBody, post, rawRequest, rpc, type RawRequest } from './raw-client.js';

const started: SimulatedCapsule[] = [];
const start = async (opts: SimulatorOptions = {}): Promise<SimulatedCapsule> => {
  const c = await startSimulator(opts);
  started.push(c);
  return c;
};
afterEach(async () => {
  await Promise.all(started.splice(0).map((c) => c.stop()));
});

/** Send and read a whole (non-streaming) response. */
const exchange = async (
  port: number,
  body: string,
  headers: Record<string, string> = JSON_CT,
  path = '/',
  method = 'POST',
) => {
  const res = rawRequest(port, { body, headers, path, method });
  await res.waitFor(
    () => res.status > 0 && res.body.length >= Number(res.header('content-length') ?? 0),
    'response',
  );
  res.close();
  return res;
};

describe('404 rule', () => {
  it.each([
    ['no content type', { body: rpc('stream/watch'), headers: {} }],
    ['text/plain', { body: rpc('stream/watch'), headers: { 'content-type': 'text/plain' } }],
    ['empty body', { body: '', headers: JSON_CT }],
    ['another path', { body: rpc('stream/watch'), headers: JSON_CT, path: '/stream' }],
    ['GET /', { body: '', headers: JSON_CT, method: 'GET' }],
  ] as [string, RawRequest][])('%s → 404 Not Found', async (_name, req) => {
    const c = await start();
    const res = await exchange(c.port, req.body ?? '', req.headers, req.path, req.method);
    expect(res.head.split('\r\n')[0]).toBe('HTTP/1.1 404 Not Found');
  });

  it('accepts a JSON content type with parameters', async () => {
    const c = await start();
    const res = post(c.port, rpc('stream/watch'), { 'content-type': 'application/json; charset=utf-8' });
    await res.waitFrames(1);
    expect(res.status).toBe(200);
    res.close();
  });
});

describe('streaming response head', () => {
  it.each(['stream/watch', 'message/stream'])(
    '%s: exactly the three headers, chunked, no content-length',
    async (method) => {
      const c = await start();
      const res = post(c.port, method === 'stream/watch' ? rpc(method) : messageBody('hi'));
      await res.waitFrames(1);
      expect(res.head).toBe(
        'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: keep-alive\r\nTransfer-Encoding: chunked',
      );
      res.close();
    },
  );
});

describe('JSON-RPC answers', () => {
  it('unknown method → -32601 JSON', async () => {
    const c = await start();
    const res = await exchange(c.port, rpc('session/stop', {}, 7));
    expect(res.status).toBe(200);
    expect(res.header('content-type')).toBe('application/json');
    expect(res.body).toBe('{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}');
  });

  it('task_acceptance none: message/stream → -32601 JSON, stream/watch still served', async () => {
    const c = await start({ taskAcceptance: 'none' });
    const res = await exchange(
      c.port,
      rpc('message/stream', { messageId: 'm', role: 'user', parts: [] }, 'abc'),
    );
    expect(res.head.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
    expect(res.header('content-type')).toBe('application/json');
    expect(res.body).toBe(
      '{"jsonrpc":"2.0","id":"abc","error":{"code":-32601,"message":"Method not found"}}',
    );
    const watch = post(c.port, rpc('stream/watch'));
    await watch.waitFrames(1);
    expect(watch.frames[0]?.event).toBe('connection-ack');
    watch.close();
    expect(() => c.submit('hi')).toThrow('task_acceptance is none');
  });

  it('a body that is not JSON → -32700', async () => {
    const c = await start();
    const res = await exchange(c.port, '{nope');
    expect(res.body).toBe('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
  });
});

describe('door token', () => {
  it('refuses POST / without the right bearer token with 401 JSON', async () => {
    const c = await start({ doorToken: 's3cret' });
    for (const headers of [JSON_CT, { ...JSON_CT, authorization: 'Bearer wrong' }]) {
      const res = await exchange(c.port, rpc('stream/watch'), headers);
      expect(res.head.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
      expect(res.header('content-type')).toBe('application/json');
      expect(res.body).toBe('{"error":"unauthorized","message":"missing or invalid door token"}');
    }
    const ok = post(c.port, rpc('stream/watch'), { authorization: 'Bearer s3cret' });
    await ok.waitFrames(1);
    expect(ok.status).toBe(200);
    ok.close();
  });
});

describe('message/stream params errors', () => {
  it('writes the parse error unescaped (invalid JSON data) and closes', async () => {
    const c = await start();
    const body = rpc('message/stream', { message: { messageId: 'm', role: 'user', parts: 'x' } });
    const res = post(c.port, body);
    await res.ended();
    expect(res.body).toBe(
      'event: error\ndata: {"error":"Invalid params: invalid type: string "x", expected a sequence"}\n\n',
    );
    expect(() => JSON.parse(res.frames[0]?.data ?? '')).toThrow();
    expect(c.written).toEqual([]);
  });

  it('missing messageId', async () => {
    const c = await start();
    const res = post(c.port, rpc('message/stream', { role: 'user', parts: [] }));
    await res.ended();
    expect(res.body).toBe('event: error\ndata: {"error":"Invalid params: missing field `messageId`"}\n\n');
  });
});

describe('tasks/get and tasks/cancel', () => {
  it('gets a running task, cancels it (task counter), then refuses to cancel it again', async () => {
    const c = await start();
    const watch = post(c.port, rpc('stream/watch'));
    await watch.waitFrames(1); // live before the task starts: a replay from 0 would skip its id-0 frame
    const task = c.submit('#sim {"hold":true}', 'ctx_given');
    await watch.waitFor(() => watch.frames.some((f) => f.event === 'status'), 'working');
    const got = await exchange(c.port, rpc('tasks/get', { id: task.taskId }, 2));
    expect(JSON.parse(got.body)).toEqual({
      jsonrpc: '2.0',
      id: 2,
      result: {
        id: task.taskId,
        context_id: 'ctx_given',
        status: { state: 'working', message: 'inference turn 1' },
      },
    });
    const canceled = await exchange(c.port, rpc('tasks/cancel', { id: task.taskId }, 3));
    expect(JSON.parse(canceled.body)).toEqual({
      jsonrpc: '2.0',
      id: 3,
      result: {
        id: task.taskId,
        context_id: 'ctx_given',
        status: { state: 'canceled', message: 'task canceled' },
      },
    });
    expect(await task.done).toEqual({ state: 'canceled' });
    await watch.waitFrames(3);
    expect(watch.frames[2]?.raw).toBe(
      `id: 1\nevent: status\ndata: {"id":"${task.taskId}","context_id":"ctx_given","status":{"state":"canceled","message":"task canceled"},"final":true}`,
    );
    const again = await exchange(c.port, rpc('tasks/cancel', { id: task.taskId }, 4));
    expect(again.body).toBe(
      '{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"Task cannot be canceled"}}',
    );
    watch.close();
  });

  it('unknown task → -32001; missing id → -32602', async () => {
    const c = await start();
    const unknown = await exchange(c.port, rpc('tasks/get', { id: 'tsk_nope' }));
    expect(unknown.body).toBe('{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}');
    const cancel = await exchange(c.port, rpc('tasks/cancel', { id: 'tsk_nope' }));
    expect(cancel.body).toBe('{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}');
    const missing = await exchange(c.port, rpc('tasks/get', {}));
    expect(missing.body).toBe('{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}');
  });

  it('tasks/get on a completed task carries the response', async () => {
    const c = await start();
    const task = c.submit('hi');
    await task.done;
    const got = await exchange(c.port, rpc('tasks/get', { id: task.taskId }));
    expect(JSON.parse(got.body).result.status).toEqual({
      state: 'completed',
      message: 'session ended',
      response: 'Echo: hi',
    });
  });

  it('cancels a queued task from the queued-cancel counter', async () => {
    const c = await start({ taskAcceptance: 'queue' });
    const running = c.submit('#sim {"hold":true}');
    const queued = c.submit('hi');
    const res = await exchange(c.port, rpc('tasks/cancel', { id: queued.taskId }));
    expect(JSON.parse(res.body).result.status).toEqual({
      state: 'canceled',
      message: 'task canceled before it started',
    });
    expect(c.written.at(-1)?.id).toBe('2305843009213693951');
    expect(await queued.done).toEqual({ state: 'canceled' });
    await exchange(c.port, rpc('tasks/cancel', { id: running.taskId }));
    await c.idle();
  });
});
