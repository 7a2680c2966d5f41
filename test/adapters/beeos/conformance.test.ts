/**
 * BeeOS black-box conformance, tasks: the whole gateway in front of a real simulated capsule. The
 * guide's reconnect loop through ≥ 20 cuts, late attach, backfill_truncated, cancel, reopened tasks.
 */
import { describe, expect, it } from 'vitest';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import {
  ALICE,
  capsuleFrames,
  capsuleStatuses,
  createTask,
  envelopesOf,
  getJson,
  openSse,
  postJson,
  startRig,
  waitForRecord,
} from './support/real-gateway.js';
import { stopAfterTest } from '../../support/stop-after-test.js';
import type { Rig } from './support/real-gateway.js';
import { collectSse, watchWithReconnects } from './support/sse-client.js';

const finalResponse = (r: Rig, contextId: string): string | undefined =>
  capsuleStatuses(r.sim, contextId).find((s) => s.status.state === 'completed')?.status.response;

const expectStrictlyIncreasing = (offsets: number[]): void => {
  expect(new Set(offsets).size).toBe(offsets.length);
  for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThan(offsets[i - 1] ?? -1);
};

describe('BeeOS conformance: tasks on the real gateway + simulator', () => {
  it('the guide reconnect loop follows a long task through ≥ 20 cuts: nothing twice, nothing missed', async () => {
    const rig = stopAfterTest(await startRig());
    const t = await createTask(rig, '#sim {"chunks":120,"thinking":3,"tools":2,"delayMs":3}');
    const url = `${rig.api}/tasks/${t.taskId}/events`;
    const watched = await watchWithReconnects(url, ALICE, 4);
    expect(watched.endReason).toBe('task_terminal');
    expect(watched.cuts).toBeGreaterThanOrEqual(20);
    const offsets = watched.envelopes.map((e) => e.offset);
    expectStrictlyIncreasing(offsets);

    // The reassembled body is the capsule's own final status.response.
    const response = finalResponse(rig, t.contextId);
    expect(response).toBeDefined();
    const last = watched.envelopes.at(-1) as Envelope;
    expect(last).toMatchObject({ type: 'agent_reply', state: 'completed', stop_reason: 'end_turn' });
    expect(last.body).toBe(response);
    const replies = watched.envelopes.filter((e) => e.type === 'agent_reply');
    expect(new Set(replies.map((e) => e.message_id)).size).toBe(1);
    for (const e of replies) expect(response?.startsWith(e.body ?? '\u0000')).toBe(true);

    // Nothing missed: one envelope per capsule frame of the task (the empty end-of-turn text
    // projects to nothing), the same list an uninterrupted late attach sees.
    const { frames } = capsuleFrames(rig.sim, t.contextId);
    const visible = frames.filter((f) => !(f.event === 'text' && JSON.parse(f.data).text === ''));
    expect(watched.envelopes.filter((e) => e.type !== 'chat_message')).toHaveLength(visible.length);
    const whole = await collectSse(url, ALICE, (e) => e.event === 'end');
    expect(envelopesOf(whole.events)).toEqual(watched.envelopes);
  });

  it('late attach with since=0 replays the whole channel, then replay_complete and end task_terminal', async () => {
    const rig = stopAfterTest(await startRig());
    const t = await createTask(rig, 'hello bees');
    const first = await collectSse(`${rig.api}/tasks/${t.taskId}/events`, ALICE, (e) => e.event === 'end');
    const late = await collectSse(
      `${rig.api}/tasks/${t.taskId}/events?since=0`,
      ALICE,
      (e) => e.event === 'end',
    );
    expect(late.status).toBe(200);
    expect(late.headers.get('content-type')).toBe('text/event-stream');
    const names = late.events.filter((e) => e.comment === undefined).map((e) => e.event);
    expect(names.slice(-2)).toEqual(['replay_complete', 'end']);
    expect(JSON.parse(late.events.at(-1)?.data ?? '')).toEqual({ reason: 'task_terminal' });
    const envs = envelopesOf<Envelope>(late.events);
    expect(envs[0]).toMatchObject({
      type: 'chat_message',
      publisher_id: 'user:alice',
      payload: { text: 'hello bees' },
    });
    expect(envs.at(-1)).toMatchObject({ state: 'completed', body: 'Echo: hello bees' });
    const rc = late.events.find((e) => e.event === 'replay_complete');
    expect(JSON.parse(rc?.data ?? '')).toEqual({ latest_offset: envs.at(-1)?.offset });
    expect(envelopesOf(first.events)).toEqual(envs);
    // Resume from the middle: exactly the tail.
    const mid = envs[2] as Envelope;
    const tail = await collectSse(
      `${rig.api}/tasks/${t.taskId}/events?since=${mid.offset}`,
      ALICE,
      (e) => e.event === 'end',
    );
    expect(envelopesOf(tail.events)).toEqual(envs.slice(3));
  });

  it('a since older than retention yields backfill_truncated, then the surviving rows', async () => {
    const rig = stopAfterTest(await startRig({ retention: { maxRecords: 20, maxAgeMs: 3_600_000 } }));
    const t = await createTask(rig, '#sim {"chunks":60}');
    await collectSse(`${rig.api}/tasks/${t.taskId}/events`, ALICE, (e) => e.event === 'end');
    const position = await rig.gw.core.position(rig.capsule);
    expect(position.first).toBeGreaterThan(1);
    const res = await collectSse(
      `${rig.api}/tasks/${t.taskId}/events?since=0`,
      ALICE,
      (e) => e.event === 'end',
    );
    const events = res.events.filter((e) => e.comment === undefined);
    expect(events[0]?.event).toBe('backfill_truncated');
    const bt = JSON.parse(events[0]?.data ?? '') as Record<string, unknown>;
    expect(bt).toMatchObject({ since: 0 });
    expect(typeof bt.hint).toBe('string');
    const oldest = bt.oldest_redis_offset as number;
    expect(oldest).toBeGreaterThanOrEqual(position.first * 4);
    const envs = envelopesOf<Envelope>(events);
    expect(envs.length).toBeGreaterThan(0);
    for (const e of envs) expect(e.offset).toBeGreaterThanOrEqual(oldest);
    expect(envs.at(-1)).toMatchObject({ state: 'completed', body: finalResponse(rig, t.contextId) });
    expect(events.slice(-2).map((e) => e.event)).toEqual(['replay_complete', 'end']);
  });

  it('cancel ends the stream with channel_closed after a chat_cancel; the task reads canceled', async () => {
    const rig = stopAfterTest(await startRig());
    const t = await createTask(rig, '#sim {"hold":true}');
    const live = await openSse(`${rig.api}/tasks/${t.taskId}/events`, { headers: ALICE });
    await live.until((e) => e.event === 'replay_complete');
    const cancel = await postJson(`${rig.api}/tasks/${t.taskId}/cancel`, {});
    expect(cancel.status).toBe(200);
    expect(((await cancel.json()) as { data: { status: string } }).data.status).toBe('canceled');
    const rest = await live.until((e) => e.event === 'end');
    expect(JSON.parse(rest.at(-1)?.data ?? '')).toEqual({ reason: 'channel_closed' });
    expect(envelopesOf(rest).at(-1)).toMatchObject({ type: 'chat_cancel', publisher_id: 'user:alice' });
    live.close();
    const again = await postJson(`${rig.api}/tasks/${t.taskId}/cancel`, {});
    expect(again.status).toBe(200); // idempotent
    const status = await getJson<{ status: string }>(`${rig.api}/tasks/${t.taskId}`);
    expect(status.body.data.status).toBe('canceled');
    // The capsule really stopped the task: it is free for the next one.
    await rig.sim.idle();
  });

  it('a reopened task: the stream ends at the first final status; /messages shows the reopened attempt', async () => {
    const rig = stopAfterTest(await startRig());
    const t = await createTask(rig, '#sim {"reopen":true,"chunks":3}');
    const res = await collectSse(`${rig.api}/tasks/${t.taskId}/events`, ALICE, (e) => e.event === 'end');
    expect(JSON.parse(res.events.at(-1)?.data ?? '')).toEqual({ reason: 'task_terminal' });
    const streamed = envelopesOf<Envelope>(res.events);
    expect(streamed.filter((e) => e.state === 'completed' && e.type === 'agent_reply')).toHaveLength(1);
    // Wait until the reopened attempt's final status is in the log.
    let finals = 0;
    await waitForRecord(rig.gw.core, rig.capsule, (r) => {
      if (r.kind !== 'frame' || r.event !== 'status') return false;
      const d = JSON.parse(r.data) as { status: { state: string } };
      if (d.status.state === 'completed') finals++;
      return finals === 2;
    });
    const page = await getJson<{ messages: Envelope[] }>(`${rig.api}/tasks/${t.taskId}/messages`);
    const done = page.body.data.messages.filter((e) => e.type === 'agent_reply' && e.state === 'completed');
    expect(done).toHaveLength(2);
    expect(done[0]?.message_id).not.toBe(done[1]?.message_id);
    const responses = capsuleStatuses(rig.sim, t.contextId)
      .filter((s) => s.status.state === 'completed')
      .map((s) => s.status.response);
    expect(done.map((e) => e.body)).toEqual(responses);
    // A late attach ends at the same place the live stream did: the first final status.
    const late = await collectSse(`${rig.api}/tasks/${t.taskId}/events`, ALICE, (e) => e.event === 'end');
    expect(envelopesOf(late.events)).toEqual(streamed);
    const status = await getJson<{ status: string }>(`${rig.api}/tasks/${t.taskId}`);
    expect(status.body.data.status).toBe('completed');
  });

  it('readers sharing encodings stay exact: a full-history reader and a post-trim reader differ', async () => {
    const rig = stopAfterTest(await startRig({ retention: { maxRecords: 60, maxAgeMs: 3_600_000 } }));
    // A first task settles ingestion (the upstream's replay window after connecting holds frames
    // back and appends them in one burst, larger than this retention), so the next one flows live.
    const warm = await createTask(rig, 'warm up');
    await collectSse(`${rig.api}/tasks/${warm.taskId}/events`, ALICE, (e) => e.event === 'end');
    const t = await createTask(rig, '#sim {"chunks":200,"delayMs":4}');
    const url = `${rig.api}/tasks/${t.taskId}/events`;
    const a = await openSse(url, { headers: ALICE });
    const twin = await openSse(url, { headers: ALICE }); // same state as `a`: shares its encodings
    const twinDone = twin.rest();
    // Offsets start at a time floor: count from the task's first envelope.
    let firstOffset: number | null = null;
    const early = await a.until((e) => {
      if (e.event !== 'message') return false;
      const offset = (JSON.parse(e.data) as { offset: number }).offset;
      firstOffset ??= offset;
      return offset > firstOffset + 4 * 100;
    });
    const b = await openSse(`${url}?since=0`, { headers: ALICE });
    const [restA, eventsTwin, eventsB] = await Promise.all([a.rest(), twinDone, b.rest()]);
    expect(restA.at(-1)?.event).toBe('end');
    const envA = envelopesOf<Envelope>([...early, ...restA]);
    expect(envelopesOf(eventsTwin)).toEqual(envA);
    expect(eventsB[0]?.event).toBe('backfill_truncated');
    const response = finalResponse(rig, t.contextId) ?? '';
    const byOffset = new Map(envA.map((e) => [e.offset, e]));
    let compared = 0;
    for (const e of envelopesOf<Envelope>(eventsB)) {
      const twinOfB = byOffset.get(e.offset);
      expect(twinOfB).toBeDefined();
      if (e.state !== 'streaming' || !twinOfB?.body) continue;
      // `a` folded the whole reply, `b` only what survived retention: same tail, shorter body.
      expect(response.startsWith(twinOfB.body)).toBe(true);
      expect(twinOfB.body.endsWith(e.body ?? '\u0000')).toBe(true);
      expect((e.body ?? '').length).toBeLessThan(twinOfB.body.length);
      compared++;
    }
    expect(compared).toBeGreaterThan(5);
    expect(envelopesOf<Envelope>(eventsB).at(-1)?.body).toBe(response);
  });
});
