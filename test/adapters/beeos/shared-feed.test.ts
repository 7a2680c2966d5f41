/**
 * Shared per-channel projections (adapters/beeos/channel-feed.ts): many listeners of a few channels
 * each get exactly their channel's envelopes once (the old whole-capsule projector is the oracle),
 * a live record is projected once per channel rather than once per connection, and a client past
 * the byte bound is cut without `end` and resumes exactly with `since`.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChannelProjector } from '../../../adapters/beeos/projection.js';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { startHarness } from './support/harness.js';
import type { Harness } from './support/harness.js';
import { expectStreamMatches, oracleOf, readWholeLog } from './support/oracle.js';
import { openSse, waitForRecord } from './support/real-gateway.js';
import type { SseSession } from './support/real-gateway.js';
import { collectSse, readSse } from './support/sse-client.js';
import type { SseEvent } from './support/sse-client.js';

let h: Harness | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.close();
  h = undefined;
});

const api = (hh: Harness) => `${hh.baseUrl}/api/v1/agents/${hh.capsule}`;
const post = (url: string, body: unknown) =>
  fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

/** Wait on the log until `n` completed status frames are in it. */
const completedStatuses = async (hh: Harness, n: number): Promise<void> => {
  let seen = 0;
  await waitForRecord(hh.core, hh.capsule, (r) => {
    if (r.kind !== 'frame' || r.event !== 'status') return false;
    if ((JSON.parse(r.data) as { status: { state: string } }).status.state === 'completed') seen++;
    return seen === n;
  });
};

describe('BeeOS shared channel projections', () => {
  it('50 listeners over 5 conversations: each gets exactly its channel once; a record is projected once per channel', async () => {
    const hh = (h = await startHarness());
    const convs: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await post(`${api(hh)}/conversations`, {});
      convs.push(((await res.json()) as { data: { conversation_id: string } }).data.conversation_id);
    }
    for (const [i, id] of convs.entries()) {
      const res = await post(`${api(hh)}/conversations/${id}/messages`, {
        message: `#script {"chunks":${3 + i}}`,
      });
      expect(res.status).toBe(202);
    }
    await completedStatuses(hh, 5);
    // Cursors to resume from: the start, the middle of turn 1, its end.
    const sinces = new Map<string, number[]>();
    for (const id of convs) {
      const page = (await (
        await fetch(`${api(hh)}/conversations/${id}/messages?include_deltas=true`)
      ).json()) as {
        data: { messages: Envelope[]; latest_offset: number };
      };
      sinces.set(id, [0, page.data.messages[2]?.offset ?? 0, page.data.latest_offset]);
    }
    const listeners: { id: string; since: number; deltas: boolean; session: SseSession }[] = [];
    for (const id of convs)
      for (let j = 0; j < 10; j++) {
        const since = sinces.get(id)?.[j % 3] ?? 0;
        const deltas = j % 2 === 0;
        const session = await openSse(
          `${api(hh)}/conversations/${id}/events?since=${since}${deltas ? '&include_deltas=true' : ''}`,
        );
        listeners.push({ id, since, deltas, session });
      }
    const heads: Promise<SseEvent[]>[] = listeners.map((l) =>
      l.session.until((e) => e.event === 'replay_complete'),
    );
    const replayed = await Promise.all(heads);

    // Every listener has joined: from here a live record costs one projection per channel.
    const { head: before } = await hh.core.position(hh.capsule);
    const project = vi.spyOn(ChannelProjector.prototype, 'project');
    for (const [i, id] of convs.entries())
      await post(`${api(hh)}/conversations/${id}/messages`, {
        message: `#script {"chunks":${2 + i},"tools":1}`,
      });
    await completedStatuses(hh, 10);
    const { head: after } = await hh.core.position(hh.capsule);
    const liveRecords = (await readWholeLog(hh.core, hh.capsule)).filter(
      (r) => r.offset > before && r.offset <= after,
    ).length;
    // Old path: 50 connections × every record. Facts go to every channel; frames to their own.
    expect(project.mock.calls.length).toBeLessThanOrEqual(liveRecords * 2);
    project.mockRestore();

    for (const id of convs)
      expect((await fetch(`${api(hh)}/conversations/${id}`, { method: 'DELETE' })).status).toBe(204);
    const rests = await Promise.all(listeners.map((l) => l.session.rest()));
    const log = await readWholeLog(hh.core, hh.capsule);
    listeners.forEach((l, i) => {
      const events = [...(replayed[i] ?? []), ...(rests[i] ?? [])];
      expectStreamMatches(events, oracleOf(log, hh.capsule, l.id), l.since, l.deltas);
    });
  });

  it('a client past the byte bound is cut without end and resumes exactly with since', async () => {
    const hh = (h = await startHarness({ maxQueuedBytes: 64 * 1024 }));
    const created = await post(`${api(hh)}/tasks`, { message: '#script {"chunks":2500}' });
    const taskId = ((await created.json()) as { data: { task_id: string } }).data.task_id;
    const url = `${api(hh)}/tasks/${taskId}/events`;
    // The stalled client: its response is open but nothing reads it.
    const ac = new AbortController();
    const stalled = await fetch(url, { signal: ac.signal });
    // A witness in the same state shares the projection: when it has the end, every write to the
    // stalled client happened too (same dispatch), so the bound was passed by then.
    const witness = await collectSse(url, {}, (e) => e.event === 'end');
    expect(witness.events.at(-1)?.data).toBe('{"reason":"task_terminal"}');
    const first: SseEvent[] = [];
    for await (const ev of readSse(stalled)) first.push(ev);
    expect(first.some((e) => e.event === 'end')).toBe(false);
    const got = first.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    const all = witness.events
      .filter((e) => e.event === 'message')
      .map((e) => JSON.parse(e.data) as Envelope);
    expect(got.length).toBeLessThan(all.length);
    const since = got.at(-1)?.offset ?? 0;
    const resumed = await collectSse(`${url}?since=${since}`, {}, (e) => e.event === 'end');
    const rest = resumed.events
      .filter((e) => e.event === 'message')
      .map((e) => JSON.parse(e.data) as Envelope);
    expect([...got, ...rest]).toEqual(all);
    expect(resumed.events.at(-1)?.data).toBe('{"reason":"task_terminal"}');
    ac.abort();
  });
});
