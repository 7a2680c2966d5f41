/** BeeOS tasks: creation, status, events (reconnect loop, late attach, truncation), cancel, messages. */
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { startHarness, replyOf } from './support/harness.js';
import type { Harness } from './support/harness.js';
import { collectSse, watchWithReconnects } from './support/sse-client.js';

let h: Harness;
afterEach(async () => h?.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${h.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
const base = () => `/api/v1/agents/${h.capsule}`;
const createTask = async (message: string, extra: object = {}) => {
  const res = await post(`${base()}/tasks`, { message, ...extra });
  expect(res.status).toBe(202);
  return ((await res.json()) as { data: { task_id: string; status: string } }).data;
};
const contextOf = async (taskId: string) =>
  ((await (await fetch(`${h.baseUrl}${base()}/tasks/${taskId}`)).json()) as { data: { context_id: string } })
    .data.context_id;

describe('tasks', () => {
  it('creates a task (202 queued) and reports its final status', async () => {
    h = await startHarness();
    const t = await createTask('hello');
    expect(t.status).toBe('queued');
    expect(t.task_id).toMatch(/^task_/);
    await h.taskDone(await contextOf(t.task_id));
    const res = await fetch(`${h.baseUrl}${base()}/tasks/${t.task_id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const body = (await res.json()) as { success: boolean; data: Record<string, unknown> };
    expect(body.success).toBe(true);
    expect(body.data).toMatchObject({
      task_id: t.task_id,
      agent_id: h.capsule,
      status: 'completed',
      result: 'Echo: hello',
    });
  });

  it('follows a long task through ≥ 20 cuts: body = final response, no envelope twice or missed', async () => {
    h = await startHarness();
    const text = '#script {"chunks":120,"thinking":3,"tools":2,"delayMs":1}';
    const t = await createTask(text);
    const url = `${h.baseUrl}${base()}/tasks/${t.task_id}/events`;
    const watched = await watchWithReconnects(url, {}, 4);
    expect(watched.endReason).toBe('task_terminal');
    expect(watched.cuts).toBeGreaterThanOrEqual(20);
    const offsets = watched.envelopes.map((e) => e.offset);
    expect(new Set(offsets).size).toBe(offsets.length);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThan(offsets[i - 1] ?? 0);
    // Nothing missed: the same as one uninterrupted late-attach read.
    const whole = await collectSse(url, {}, (e) => e.event === 'end');
    const all = whole.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect(watched.envelopes).toEqual(all);
    const terminal = watched.envelopes.filter((e) => e.type === 'agent_reply' && e.state !== 'streaming');
    expect(terminal).toHaveLength(1);
    expect(terminal[0]?.body).toBe(replyOf(text, { chunks: 120 }));
    expect(terminal[0]?.stop_reason).toBe('end_turn');
    const replies = watched.envelopes.filter((e) => e.type === 'agent_reply');
    expect(new Set(replies.map((e) => e.message_id)).size).toBe(1);
    // Cumulative: every streaming body extends the previous one.
    for (let i = 1; i < replies.length; i++)
      expect(replies[i]?.body?.startsWith(replies[i - 1]?.body ?? '')).toBe(true);
    expect(terminal[0]?.parts?.filter((p) => p.type === 'tool_result')).toHaveLength(2);
    expect(watched.envelopes.some((e) => e.type === 'agent_message_chunk')).toBe(false);
  });

  it('late attach with since=0 replays everything, then replay_complete and end task_terminal', async () => {
    h = await startHarness();
    const t = await createTask('late');
    await h.taskDone(await contextOf(t.task_id));
    const r = await collectSse(`${h.baseUrl}${base()}/tasks/${t.task_id}/events?since=0`);
    expect(r.headers.get('content-type')).toBe('text/event-stream');
    const names = r.events.map((e) => e.event);
    expect(names[0]).toBe('message');
    expect(names.slice(-2)).toEqual(['replay_complete', 'end']);
    expect(names.filter((n) => n === 'end')).toHaveLength(1);
    const msgs = r.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect(msgs[0]).toMatchObject({
      type: 'chat_message',
      state: 'completed',
      payload: { text: 'late' },
      publisher_id: 'user:anonymous',
    });
    const last = msgs[msgs.length - 1];
    expect(last).toMatchObject({
      type: 'agent_reply',
      state: 'completed',
      body: 'Echo: late',
      in_reply_to: msgs[0]?.message_id,
    });
    const rc = JSON.parse(r.events[r.events.length - 2]?.data ?? '{}') as { latest_offset: number };
    expect(rc.latest_offset).toBeGreaterThanOrEqual(last?.offset ?? 0);
    expect(JSON.parse(r.events[r.events.length - 1]?.data ?? '{}')).toEqual({ reason: 'task_terminal' });
    // Last-Event-ID is an alias of since: resuming at the terminal replays nothing more.
    const again = await collectSse(`${h.baseUrl}${base()}/tasks/${t.task_id}/events`, {
      'Last-Event-ID': String(last?.offset),
    });
    expect(again.events.map((e) => e.event)).toEqual(['replay_complete', 'end']);
  });

  it('include_deltas adds legacy agent_message_chunk frames with their own offsets', async () => {
    h = await startHarness();
    const t = await createTask('#script {"chunks":5}');
    await h.taskDone(await contextOf(t.task_id));
    const r = await collectSse(`${h.baseUrl}${base()}/tasks/${t.task_id}/events?include_deltas=true`);
    const msgs = r.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    const chunks = msgs.filter((m) => m.type === 'agent_message_chunk');
    expect(chunks.map((c) => (c.payload as { text: string }).text).join('')).toBe(replyOf('', { chunks: 5 }));
    expect(new Set(msgs.map((m) => m.offset)).size).toBe(msgs.length);
  });

  it('backfill_truncated when since is older than retention, then the surviving rows', async () => {
    h = await startHarness({ maxRecords: 10 });
    const t = await createTask('#script {"chunks":30}');
    await h.taskDone(await contextOf(t.task_id));
    const r = await collectSse(`${h.baseUrl}${base()}/tasks/${t.task_id}/events?since=4`);
    expect(r.events[0]?.event).toBe('backfill_truncated');
    const bt = JSON.parse(r.events[0]?.data ?? '{}') as Record<string, unknown>;
    expect(bt).toMatchObject({ since: 4 });
    expect(bt.oldest_redis_offset).toBeGreaterThan(4);
    const msgs = r.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect(msgs.length).toBeGreaterThan(0);
    for (const m of msgs) expect(m.offset).toBeGreaterThanOrEqual(bt.oldest_redis_offset as number);
    expect(msgs[msgs.length - 1]).toMatchObject({ state: 'completed', body: replyOf('', { chunks: 30 }) });
    expect(r.events.slice(-2).map((e) => e.event)).toEqual(['replay_complete', 'end']);
  });

  it('a failed task ends with agent_reply_error (failed / error) then task_terminal', async () => {
    h = await startHarness();
    const t = await createTask('#script {"fail":"driver invocation failed: boom"}');
    const r = await collectSse(`${h.baseUrl}${base()}/tasks/${t.task_id}/events`);
    const msgs = r.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect(msgs[msgs.length - 1]).toMatchObject({
      type: 'agent_reply_error',
      state: 'failed',
      stop_reason: 'error',
    });
    expect(r.events[r.events.length - 1]?.data).toBe('{"reason":"task_terminal"}');
    const s = (await (await fetch(`${h.baseUrl}${base()}/tasks/${t.task_id}`)).json()) as {
      data: { status: string; error: string };
    };
    expect(s.data).toMatchObject({ status: 'failed', error: 'driver invocation failed: boom' });
  });

  it('input waits map to agent.input_required and the task status to input_required then completed', async () => {
    h = await startHarness();
    const t = await createTask('#script {"input":"Which file?"}');
    await h.taskDone(await contextOf(t.task_id));
    const r = await collectSse(`${h.baseUrl}${base()}/tasks/${t.task_id}/events`);
    const msgs = r.events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect(msgs.find((m) => m.type === 'agent.input_required')).toMatchObject({
      state: 'completed',
      payload: { prompt: 'Which file?' },
    });
  });

  it('cancel: 200, idempotent, and the live stream ends with channel_closed', async () => {
    h = await startHarness();
    const t = await createTask('#script {"hold":true}');
    const url = `${h.baseUrl}${base()}/tasks/${t.task_id}/events`;
    const live = collectSse(url, {}, (e) => e.event === 'end');
    const first = await post(`${base()}/tasks/${t.task_id}/cancel`, '');
    expect(first.status).toBe(200);
    expect(((await first.json()) as { data: { status: string } }).data.status).toBe('canceled');
    const r = await live;
    expect(r.events[r.events.length - 1]?.data).toBe('{"reason":"channel_closed"}');
    expect(r.events.filter((e) => e.event === 'end')).toHaveLength(1);
    const second = await post(`${base()}/tasks/${t.task_id}/cancel`, '');
    expect(second.status).toBe(200);
  });

  it('idempotency_key returns the same task for the same owner; another message → 409', async () => {
    h = await startHarness();
    const a = await createTask('once', { idempotency_key: 'k1' });
    const b = await createTask('once', { idempotency_key: 'k1' });
    expect(b.task_id).toBe(a.task_id);
    const c = await post(`${base()}/tasks`, { message: 'other', idempotency_key: 'k1' });
    expect(c.status).toBe(409);
    expect(((await c.json()) as { error: { code: string } }).error.code).toBe('conflict');
  });

  it('GET messages pages with since/limit, latest_offset and has_more; chunks only with include_deltas', async () => {
    h = await startHarness();
    const t = await createTask('#script {"chunks":6}');
    await h.taskDone(await contextOf(t.task_id));
    const url = `${h.baseUrl}${base()}/tasks/${t.task_id}/messages`;
    type Page = {
      success: boolean;
      data: { messages: Envelope[]; latest_offset: number; has_more: boolean };
    };
    const all = (await (await fetch(url)).json()) as Page;
    expect(all.success).toBe(true);
    expect(all.data.has_more).toBe(false);
    expect(all.data.messages.some((m) => m.type === 'agent_message_chunk')).toBe(false);
    const withDeltas = (await (await fetch(`${url}?include_deltas=true`)).json()) as Page;
    expect(withDeltas.data.messages.some((m) => m.type === 'agent_message_chunk')).toBe(true);
    expect(withDeltas.data.latest_offset).toBe(all.data.latest_offset);
    const seen: Envelope[] = [];
    let since = 0;
    for (let i = 0; i < 100; i++) {
      const p = (await (await fetch(`${url}?since=${since}&limit=3`)).json()) as Page;
      seen.push(...p.data.messages);
      if (!p.data.has_more) break;
      since = p.data.messages[p.data.messages.length - 1]?.offset ?? since;
    }
    expect(seen).toEqual(all.data.messages);
  });
});
