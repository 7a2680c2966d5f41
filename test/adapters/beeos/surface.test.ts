/** BeeOS conversations, invoke, auth/ACL matrix and the exact error envelope. */
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { KEY_ALICE, KEY_BOB, KEY_UNKNOWN, startHarness } from './support/harness.js';
import type { Harness } from './support/harness.js';
import { collectSse, readSse } from './support/sse-client.js';
import type { SseEvent } from './support/sse-client.js';

let h: Harness;
afterEach(async () => h?.close());

const base = () => `/api/v1/agents/${h.capsule}`;
const req = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  fetch(`${h.baseUrl}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
const auth = (key: string) => ({ Authorization: `Bearer ${key}` });
const expectError = async (res: Response, status: number, code: string) => {
  expect(res.status).toBe(status);
  const rid = res.headers.get('x-request-id');
  expect(rid).toBeTruthy();
  const body = (await res.json()) as { success: boolean; error: Record<string, unknown> };
  expect(body).toEqual({
    success: false,
    error: { type: expect.any(String), code, message: expect.any(String), request_id: rid },
  });
};

describe('conversations', () => {
  it('stays open across turns and ends with channel_closed on DELETE; later posts 409', async () => {
    h = await startHarness();
    const created = await req('POST', `${base()}/conversations`);
    expect(created.status).toBe(201);
    const conv = ((await created.json()) as { data: { conversation_id: string; state: string } }).data;
    expect(conv.state).toBe('active');
    const url = `${h.baseUrl}${base()}/conversations/${conv.conversation_id}/events`;
    const ac = new AbortController();
    const res = await fetch(url, { signal: ac.signal });
    const events: SseEvent[] = [];
    const it = readSse(res)[Symbol.asyncIterator]();
    const next = async () => {
      const r = await it.next();
      if (r.done) throw new Error('stream closed');
      events.push(r.value);
      return r.value;
    };
    expect((await next()).event).toBe('replay_complete');
    const ctx = (
      (await (await req('GET', `${base()}/conversations/${conv.conversation_id}`)).json()) as {
        data: { context_id: string };
      }
    ).data.context_id;
    for (const turn of ['one', 'two']) {
      const posted = await req('POST', `${base()}/conversations/${conv.conversation_id}/messages`, {
        message: turn,
      });
      expect(posted.status).toBe(202);
      const { message_id } = ((await posted.json()) as { data: { message_id: string } }).data;
      for (let i = 0; i < 100; i++) {
        const ev = await next();
        const env = JSON.parse(ev.data) as Envelope;
        if (env.type === 'agent_reply' && env.state === 'completed') {
          expect(env.body).toBe(`Echo: ${turn}`);
          expect(env.in_reply_to).toBe(message_id);
          break;
        }
      }
      await h.taskDone(ctx);
    }
    const del = await req('DELETE', `${base()}/conversations/${conv.conversation_id}`);
    expect(del.status).toBe(204);
    let last: SseEvent | undefined;
    for (let i = 0; i < 100 && last?.event !== 'end'; i++) last = await next();
    expect(last?.data).toBe('{"reason":"channel_closed"}');
    expect((await it.next()).done).toBe(true);
    ac.abort();
    const envs = events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect(new Set(envs.filter((e) => e.type === 'agent_reply').map((e) => e.message_id)).size).toBe(2);
    await expectError(
      await req('POST', `${base()}/conversations/${conv.conversation_id}/messages`, { message: 'x' }),
      409,
      'conflict',
    );
    const info = (await (await req('GET', `${base()}/conversations/${conv.conversation_id}`)).json()) as {
      data: { state: string };
    };
    expect(info.data.state).toBe('closed');
    const page = (await (
      await req('GET', `${base()}/conversations/${conv.conversation_id}/messages`)
    ).json()) as {
      data: { messages: Envelope[] };
    };
    expect(page.data.messages.filter((m) => m.type === 'chat_message')).toHaveLength(2);
    const replay = await collectSse(url);
    expect(replay.events.slice(-2).map((e) => e.event)).toEqual(['replay_complete', 'end']);
  });

  it('a busy capsule answers a conversation turn 409 and the channel shows agent_busy', async () => {
    h = await startHarness();
    const conv = (
      (await (await req('POST', `${base()}/conversations`, {})).json()) as {
        data: { conversation_id: string };
      }
    ).data;
    h.mode.busy = true;
    await expectError(
      await req('POST', `${base()}/conversations/${conv.conversation_id}/messages`, { message: 'x' }),
      409,
      'conflict',
    );
    const page = (await (
      await req('GET', `${base()}/conversations/${conv.conversation_id}/messages`)
    ).json()) as {
      data: { messages: Envelope[] };
    };
    expect(page.data.messages.map((m) => m.type)).toEqual(['chat_message', 'agent_busy']);
    expect(page.data.messages[1]).toMatchObject({ state: 'refused', stop_reason: 'refused' });
  });

  it('stream_closed when the capsule closes its stream or the gateway shuts down', async () => {
    h = await startHarness();
    const conv = (
      (await (await req('POST', `${base()}/conversations`, {})).json()) as {
        data: { conversation_id: string };
      }
    ).data;
    const url = `${h.baseUrl}${base()}/conversations/${conv.conversation_id}/events`;
    const a = collectSse(url, {}, (e) => e.event === 'replay_complete');
    await a;
    const live = collectSse(url, {}, (e) => e.event === 'end');
    const first = collectSse(url, {}, (e) => e.event === 'replay_complete');
    await first;
    await h.closeCapsuleStream();
    expect((await live).events.at(-1)?.data).toBe('{"reason":"stream_closed"}');
    const again = collectSse(url, {}, (e) => e.event === 'end');
    const opened = await collectSse(url, {}, (e) => e.event === 'replay_complete');
    expect(opened.status).toBe(200);
    h.shutdown();
    expect((await again).events.at(-1)?.data).toBe('{"reason":"stream_closed"}');
  });
});

describe('invoke', () => {
  const invoke = (body: unknown, sse: boolean) =>
    req('POST', `${base()}/invoke`, body, sse ? { Accept: 'text/event-stream' } : {});
  const frames = async (res: Response) => {
    const out: Record<string, unknown>[] = [];
    for await (const ev of readSse(res))
      if (ev.data) out.push(JSON.parse(ev.data) as Record<string, unknown>);
    return out;
  };

  it('SSE: delta/reasoning frames then one done with the full reply', async () => {
    h = await startHarness();
    const res = await invoke({ message: '#script {"chunks":4}' }, true);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const f = await frames(res);
    expect(f.filter((x) => x.type === 'reasoning').length).toBe(1);
    const deltas = f
      .filter((x) => x.type === 'delta')
      .map((x) => x.text)
      .join('');
    const done = f.at(-1);
    expect(done).toMatchObject({ type: 'done', text: 'w0 w1 w2 w3 ' });
    expect(done?.context_id).toMatch(/^ch-/);
    expect(deltas).toBe(done?.text);
    expect(f.filter((x) => x.type === 'done')).toHaveLength(1);
  });

  it('JSON: the blocking equivalent', async () => {
    h = await startHarness();
    const res = await invoke({ message: 'hi' }, false);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { success: boolean; data: Record<string, unknown> };
    expect(body.data).toMatchObject({ text: 'Echo: hi' });
  });

  it('failed task: done with is_error and agent_reply_error (SSE and JSON)', async () => {
    h = await startHarness();
    const f = await frames(await invoke({ message: '#script {"fail":"boom"}' }, true));
    expect(f).toEqual([
      expect.objectContaining({ type: 'reasoning' }),
      expect.objectContaining({
        type: 'done',
        is_error: true,
        code: 'agent_reply_error',
        error: 'boom',
        text: 'boom',
      }),
    ]);
    const j = (await (await invoke({ message: '#script {"fail":"boom"}' }, false)).json()) as {
      data: Record<string, unknown>;
    };
    expect(j.data).toMatchObject({ is_error: true, code: 'agent_reply_error', error: 'boom' });
  });

  it('busy → 409 conflict and unreachable → 503 before streaming (SSE and JSON)', async () => {
    h = await startHarness();
    h.mode.busy = true;
    await expectError(await invoke({ message: 'x' }, true), 409, 'conflict');
    await expectError(await invoke({ message: 'x' }, false), 409, 'conflict');
    h.mode.busy = false;
    h.mode.unreachable = true;
    await expectError(await invoke({ message: 'x' }, true), 503, 'agent_service_unavailable');
    await expectError(await invoke({ message: 'x' }, false), 503, 'agent_service_unavailable');
  });

  it('timeout → error + done frames after streaming started, 504 service_timeout in JSON', async () => {
    h = await startHarness({ invokeTimeoutMs: 200 });
    const f = await frames(await invoke({ message: '#script {"hold":true}' }, true));
    expect(f).toEqual([
      { type: 'error', code: 'service_timeout', status_code: 504, message: expect.any(String) },
      { type: 'done', is_error: true, code: 'service_timeout', error: expect.any(String) },
    ]);
    await expectError(await invoke({ message: '#script {"hold":true}' }, false), 504, 'service_timeout');
  });
});

describe('auth, ACL and bad input', () => {
  it('ACL matrix: owner, other owner, no key, bad key, unknown id', async () => {
    h = await startHarness({ keys: true });
    const created = await req('POST', `${base()}/tasks`, { message: 'mine' }, auth(KEY_ALICE));
    expect(created.status).toBe(202);
    const id = ((await created.json()) as { data: { task_id: string } }).data.task_id;
    const conv = (
      (await (await req('POST', `${base()}/conversations`, {}, auth(KEY_ALICE))).json()) as {
        data: { conversation_id: string };
      }
    ).data.conversation_id;
    for (const path of [
      `tasks/${id}`,
      `tasks/${id}/messages`,
      `tasks/${id}/events?since=999999999`,
      `conversations/${conv}`,
    ]) {
      const url = `${base()}/${path}`;
      if (path.includes('events')) {
        const r = await collectSse(
          `${h.baseUrl}${url}`,
          auth(KEY_ALICE),
          (e) => e.event === 'replay_complete' || e.event === 'end',
        );
        expect(r.status).toBe(200);
      } else expect((await req('GET', url, undefined, auth(KEY_ALICE))).status).toBe(200);
      // Another owner's task or conversation is the 404 of an unknown id (a 403, or another code,
      // would confirm it exists).
      await expectError(await req('GET', url, undefined, auth(KEY_BOB)), 404, 'agent_not_found');
      await expectError(await req('GET', url), 401, 'missing_token');
      await expectError(await req('GET', url, undefined, auth(KEY_UNKNOWN)), 401, 'invalid_token');
      await expectError(
        await req('GET', url, undefined, { Authorization: 'Bearer nope' }),
        401,
        'invalid_token',
      );
    }
    await expectError(
      await req('POST', `${base()}/tasks/${id}/cancel`, '', auth(KEY_BOB)),
      404,
      'agent_not_found',
    );
    await expectError(
      await req('DELETE', `${base()}/conversations/${conv}`, undefined, auth(KEY_BOB)),
      404,
      'agent_not_found',
    );
    // The same body as for an id that never existed, but for the id itself.
    const foreign = (await (await req('GET', `${base()}/tasks/${id}`, undefined, auth(KEY_BOB))).json()) as {
      error: Record<string, unknown>;
    };
    const unknown = (await (
      await req('GET', `${base()}/tasks/task_nope`, undefined, auth(KEY_BOB))
    ).json()) as {
      error: Record<string, unknown>;
    };
    const strip = (e: Record<string, unknown>) => ({
      ...e,
      request_id: undefined,
      message: String(e.message).replace(/:.*$/, ''),
    });
    expect(strip(foreign.error)).toEqual(strip(unknown.error));
    await expectError(
      await req('GET', `${base()}/tasks/task_nope`, undefined, auth(KEY_ALICE)),
      404,
      'agent_not_found',
    );
    await expectError(
      await req('GET', `${base()}/conversations/${id}`, undefined, auth(KEY_ALICE)),
      404,
      'agent_not_found',
    );
    // Same idempotency key, other owner: a separate task.
    const k1 = await req('POST', `${base()}/tasks`, { message: 'm', idempotency_key: 'k' }, auth(KEY_ALICE));
    const k2 = await req('POST', `${base()}/tasks`, { message: 'm', idempotency_key: 'k' }, auth(KEY_BOB));
    const [a, b] = [await k1.json(), await k2.json()] as { data: { task_id: string } }[];
    expect(a?.data.task_id).not.toBe(b?.data.task_id);
  });

  it('bad input: every error in the envelope with a request id', async () => {
    h = await startHarness({ config: { bodyLimitBytes: 1000 } });
    await expectError(await req('POST', `${base()}/tasks`, '{nope'), 400, 'invalid_json');
    await expectError(await req('POST', `${base()}/tasks`, {}), 400, 'missing_param');
    await expectError(await req('POST', `${base()}/invoke`, { context: 1 }), 400, 'missing_param');
    await expectError(await req('POST', `${base()}/tasks`, { message: 7 }), 400, 'invalid_body');
    await expectError(await req('POST', `${base()}/tasks`, '[1]'), 400, 'invalid_body');
    await expectError(
      await req('POST', `${base()}/tasks`, { message: 'x'.repeat(2000) }),
      413,
      'payload_too_large',
    );
    await expectError(
      await req('POST', '/api/v1/agents/nope/tasks', { message: 'x' }),
      404,
      'agent_not_found',
    );
    const conv = (
      (await (await req('POST', `${base()}/conversations`)).json()) as { data: { conversation_id: string } }
    ).data.conversation_id;
    await expectError(
      await req('GET', `${base()}/conversations/${conv}/events?since=abc`),
      400,
      'invalid_param',
    );
    await expectError(
      await req('GET', `${base()}/conversations/${conv}/messages?limit=0`),
      400,
      'invalid_param',
    );
    await expectError(
      await req('GET', `${base()}/conversations/${conv}/messages?include_deltas=maybe`),
      400,
      'invalid_param',
    );
    await expectError(await req('PUT', `${base()}/tasks`), 405, 'method_not_allowed');
    await expectError(await req('GET', `${base()}/nothing`), 404, 'not_found');
    const rid = await req('GET', `${base()}/tasks/none`, undefined, { 'X-Request-Id': 'abc-123' });
    expect(rid.headers.get('x-request-id')).toBe('abc-123');
  });
});
