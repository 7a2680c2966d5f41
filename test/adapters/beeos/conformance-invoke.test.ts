/**
 * BeeOS black-box conformance, invoke and conversations: SSE and JSON invoke against completed,
 * failed, busy, unreachable and mid-task-lost capsules; a conversation across turns to DELETE.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import {
  ALICE,
  capsuleStatuses,
  createTask,
  envelopesOf,
  openSse,
  postJson,
  startRig,
} from './support/real-gateway.js';
import type { Rig } from './support/real-gateway.js';
import { until } from '../../fleet/fleet-rig.js';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked by toEqual
type Json = any;
type Frame = { type: string; text?: string; code?: string; [k: string]: unknown };

const invokeSse = async (r: Rig, message: string) => {
  const s = await openSse(`${r.api}/invoke`, {
    method: 'POST',
    headers: { ...ALICE, 'Content-Type': 'application/json' },
    body: JSON.stringify({ message }),
  });
  return s;
};
const framesOf = (events: { data: string; event: string }[]): Frame[] =>
  events.map((e) => {
    expect(e.event).toBe('message'); // unnamed frames only (BeeOS "Streaming" §2)
    return JSON.parse(e.data) as Frame;
  });
const invokeJson = async (r: Rig, message: string) => {
  const res = await postJson(`${r.api}/invoke`, { message });
  return { status: res.status, requestId: res.headers.get('x-request-id'), body: (await res.json()) as Json };
};
const expectErrorEnvelope = (
  got: { status: number; requestId: string | null; body: Json },
  status: number,
  code: string,
) => {
  expect(got.status).toBe(status);
  expect(got.body).toEqual({
    success: false,
    error: { type: expect.any(String), code, message: expect.any(String), request_id: got.requestId },
  });
};

describe('BeeOS conformance: invoke on the real gateway + simulator', () => {
  it('completed: deltas add up to done.text = the capsule status.response; JSON gives the same', async () => {
    rig = await startRig();
    const s = await invokeSse(rig, '#sim {"chunks":12,"thinking":2}');
    expect(s.status).toBe(200);
    const frames = framesOf(await s.rest());
    const done = frames.at(-1) as Frame;
    expect(done.type).toBe('done');
    expect(frames.filter((f) => f.type === 'done')).toHaveLength(1);
    expect(frames.some((f) => f.type === 'reasoning')).toBe(true);
    const text = frames
      .filter((f) => f.type === 'delta')
      .map((f) => f.text)
      .join('');
    const response = capsuleStatuses(rig.sim, done.context_id as string).find(
      (x) => x.status.state === 'completed',
    )?.status.response;
    expect(text).toBe(response);
    expect(done).toEqual({ type: 'done', text: response, context_id: expect.stringMatching(/^ch-/) });

    const json = await invokeJson(rig, 'plain hello');
    expect(json.status).toBe(200);
    expect(json.body).toEqual({
      success: true,
      data: {
        text: 'Echo: plain hello',
        context_id: expect.stringMatching(/^ch-/),
        task_id: expect.any(String),
        reasoning: expect.any(String),
      },
    });
  });

  it('failed: one done with is_error and agent_reply_error, no error frame; JSON 200 with is_error', async () => {
    rig = await startRig();
    const s = await invokeSse(rig, '#sim {"fail":"boom","chunks":2}');
    const frames = framesOf(await s.rest());
    expect(frames.filter((f) => f.type === 'error')).toHaveLength(0);
    expect(frames.at(-1)).toEqual({
      type: 'done',
      is_error: true,
      code: 'agent_reply_error',
      error: 'boom',
      text: 'boom',
      context_id: expect.any(String),
    });
    const json = await invokeJson(rig, '#sim {"fail":"bang"}');
    expect(json.status).toBe(200);
    expect(json.body.data).toMatchObject({ is_error: true, code: 'agent_reply_error', error: 'bang' });
  });

  it('busy: invoke while a task holds the capsule → 409 conflict (SSE and JSON); a task waits queued', async () => {
    const r = await startRig();
    rig = r;
    const held = await createTask(r, '#sim {"hold":true}');
    // The task goes through the submission queue: wait until the capsule runs it.
    await until('the held task running', async () => (r.sim.runs.size === 1 ? true : null));
    const sse = await fetch(`${rig.api}/invoke`, {
      method: 'POST',
      headers: { ...ALICE, Accept: 'text/event-stream', 'Content-Type': 'application/json' },
      body: JSON.stringify({ message: 'me too' }),
    });
    expectErrorEnvelope(
      { status: sse.status, requestId: sse.headers.get('x-request-id'), body: await sse.json() },
      409,
      'conflict',
    );
    expectErrorEnvelope(await invokeJson(rig, 'me three'), 409, 'conflict');
    // A task is admitted into the queue (docs/submission-queue.md), and runs once the capsule is free.
    const task = await postJson(`${rig.api}/tasks`, { message: 'a task too' });
    expect(task.status).toBe(202);
    expect(((await task.json()) as { data: { status: string } }).data.status).toBe('queued');
    expect((await postJson(`${rig.api}/tasks/${held.taskId}/cancel`, {})).status).toBe(200);
    await until('the queued task running', async () => (r.sim.runs.size === 2 ? true : null));
    await rig.sim.idle();
  });

  it('unreachable: a stopped capsule → 503 agent_service_unavailable (SSE, JSON, task creation)', async () => {
    rig = await startRig();
    await rig.sim.stop();
    const sse = await fetch(`${rig.api}/invoke`, {
      method: 'POST',
      headers: { ...ALICE, Accept: 'text/event-stream', 'Content-Type': 'application/json' },
      body: JSON.stringify({ message: 'anyone?' }),
    });
    expectErrorEnvelope(
      { status: sse.status, requestId: sse.headers.get('x-request-id'), body: await sse.json() },
      503,
      'agent_service_unavailable',
    );
    expectErrorEnvelope(await invokeJson(rig, 'anyone?'), 503, 'agent_service_unavailable');
    const task = await postJson(`${rig.api}/tasks`, { message: 'anyone?' });
    expect(task.status).toBe(503);
  });

  it('a capsule lost mid-task ends the invoke stream with error 503 then done', async () => {
    rig = await startRig({ heartbeatMs: 500 }); // the lost-capsule grace is max(2 s, heartbeat)
    const s = await invokeSse(rig, '#sim {"chunks":500,"delayMs":20}');
    const first = await s.until((e) => (JSON.parse(e.data) as Frame).type === 'delta');
    expect(first.length).toBeGreaterThan(0);
    await rig.sim.stop();
    const frames = framesOf(await s.rest());
    expect(frames.slice(-2)).toEqual([
      { type: 'error', code: 'agent_service_unavailable', status_code: 503, message: expect.any(String) },
      { type: 'done', is_error: true, code: 'agent_service_unavailable', error: expect.any(String) },
    ]);
    expect(frames.filter((f) => f.type === 'done')).toHaveLength(1);
  });
});

describe('BeeOS conformance: conversations on the real gateway + simulator', () => {
  it('stays open across turns; DELETE ends it with channel_closed; later posts 409', async () => {
    rig = await startRig();
    const created = await postJson(`${rig.api}/conversations`, {});
    expect(created.status).toBe(201);
    const conv = ((await created.json()) as { data: { conversation_id: string } }).data.conversation_id;
    const live = await openSse(`${rig.api}/conversations/${conv}/events`, { headers: ALICE });
    expect(live.status).toBe(200);
    await live.until((e) => e.event === 'replay_complete');
    const turn = async (message: string): Promise<Envelope[]> => {
      const res = await postJson(`${rig!.api}/conversations/${conv}/messages`, { message });
      expect(res.status).toBe(202);
      const { message_id } = ((await res.json()) as { data: { message_id: string } }).data;
      const events = await live.until(
        (e) =>
          e.event === 'message' &&
          (JSON.parse(e.data) as Envelope).state === 'completed' &&
          (JSON.parse(e.data) as Envelope).type === 'agent_reply',
      );
      const envs = envelopesOf<Envelope>(events);
      expect(envs[0]).toMatchObject({ type: 'chat_message', message_id, payload: { text: message } });
      expect(envs.at(-1)).toMatchObject({ in_reply_to: message_id, body: `Echo: ${message}` });
      return envs;
    };
    const one = await turn('first turn');
    await rig.sim.idle();
    const two = await turn('second turn');
    expect(one.at(-1)?.message_id).not.toBe(two.at(-1)?.message_id);
    expect((two[0]?.offset ?? 0) > (one.at(-1)?.offset ?? 0)).toBe(true);

    const del = await fetch(`${rig.api}/conversations/${conv}`, { method: 'DELETE', headers: ALICE });
    expect(del.status).toBe(204);
    const end = await live.until((e) => e.event === 'end');
    expect(JSON.parse(end.at(-1)?.data ?? '')).toEqual({ reason: 'channel_closed' });
    live.close();
    const late = await postJson(`${rig.api}/conversations/${conv}/messages`, { message: 'too late' });
    expect(late.status).toBe(409);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe('conflict');
  });
});
