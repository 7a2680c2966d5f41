/**
 * A path segment whose percent-encoding does not decode is a 400 in the grammar of the surface it
 * was sent to, whichever segment it is (capsule, conversation, task), and nothing is admitted: the
 * capsule's log gains no submission and the capsule is sent no task.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { gatewayForFile } from '../support/gateway-for-file.js';

const KEY = 'malformed-path-key-0123456789';
const auth = { authorization: `Bearer ${KEY}` };
const json = { 'content-type': 'application/json', ...auth };

const rig = gatewayForFile({
  gateway: { config: { apiKeys: [{ sha256: createHash('sha256').update(KEY).digest('hex'), owner: 'o1' }] } },
});

const submissions = async (): Promise<number> => {
  const { records } = await rig.gw.core.read('cap', 0, 10_000);
  return records.filter((r) => r.kind === 'submission').length;
};

const send = (method: string, path: string, body?: unknown): Promise<Response> =>
  fetch(`${rig.gw.baseUrl}${path}`, {
    method,
    headers: body === undefined ? auth : json,
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe('malformed percent-encoding in a path segment', () => {
  it('Flue: 400 invalid_request for the conversation and the capsule segment, nothing admitted', async () => {
    for (const path of ['/flue/cap/%E0%A4%A', '/flue/%E0%A4%A/conv', '/flue/cap/%zz']) {
      const res = await send('POST', path, { kind: 'user', body: 'hello' });
      expect(res.status, path).toBe(400);
      expect(await res.json()).toEqual({
        error: { type: 'invalid_request', message: 'malformed percent-encoding in the path', details: '' },
      });
    }
    const head = await send('HEAD', '/flue/cap/%E0%A4%A');
    expect(head.status).toBe(400);
    expect(await head.text()).toBe('');
    expect(await submissions()).toBe(0);
    expect(rig.sim.written.filter((f) => f.event === 'status')).toEqual([]);
  });

  it('BeeOS: 400 invalid_param for the task and the conversation segment, nothing admitted', async () => {
    for (const [method, path] of [
      ['POST', '/api/v1/agents/cap/conversations/%E0%A4%A/messages'],
      ['GET', '/api/v1/agents/cap/tasks/%E0%A4%A'],
      ['GET', '/api/v1/agents/%E0/tasks'],
    ] as const) {
      const res = await send(method, path, method === 'POST' ? { message: 'hello' } : undefined);
      expect(res.status, path).toBe(400);
      const body = (await res.json()) as { success: boolean; error: Record<string, string> };
      expect(body.success).toBe(false);
      expect(body.error).toMatchObject({
        type: 'invalid_request_error',
        code: 'invalid_param',
        message: 'malformed percent-encoding in the path',
      });
      expect(body.error.request_id).toBe(res.headers.get('x-request-id'));
    }
    expect(await submissions()).toBe(0);
  });

  it('native: JSON-RPC -32600 on the address, the poll grammar on /poll, a plain 400 on /events', async () => {
    const rpc = await send('POST', '/murmur/%E0%A4%A', {
      jsonrpc: '2.0',
      id: 1,
      method: 'message/stream',
      params: { message: { messageId: 'm1', role: 'user', parts: [{ kind: 'text', text: 'hi' }] } },
    });
    expect(rpc.status).toBe(400);
    expect(await rpc.json()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Invalid Request' },
    });
    const poll = await send('GET', '/murmur/%E0%A4%A/poll');
    expect(poll.status).toBe(400);
    expect(await poll.json()).toEqual({
      error: { code: 'bad_request', message: 'malformed percent-encoding in the path' },
    });
    const events = await send('GET', '/murmur/%E0%A4%A/events');
    expect(events.status).toBe(400);
    expect(await events.text()).toBe('');
    expect(await submissions()).toBe(0);
    expect(rig.sim.written.filter((f) => f.event === 'status')).toEqual([]);
  });

  it('elsewhere: the operations grammar; a well-formed escape still routes', async () => {
    const ops = await send('GET', '/capsules/%E0');
    expect(ops.status).toBe(400);
    expect(await ops.json()).toEqual({
      error: { code: 'bad_request', message: 'malformed percent-encoding in the path' },
    });
    // `%63ap` is `cap`: it decodes, so it reaches the capsule's routes as any other spelling would.
    const routed = await send('GET', '/flue/%63ap/never-written');
    expect(routed.status).toBe(404);
    expect(((await routed.json()) as { error: { type: string } }).error.type).toBe('stream_not_found');
  });
});
