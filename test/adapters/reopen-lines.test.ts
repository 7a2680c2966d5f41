/**
 * A task reopened by an `on-task-end` hook, on the lines where that is one task with one final
 * status (0.5 and later: the reopen is a non-final `working` frame with a `reopen` number). BeeOS
 * shows each attempt as its own completed reply and ends the task at its one final; Flue answers
 * each attempt in an assistant message of its own and settles the submission once, at the final.
 * Neither glues the two attempts' text together. (The spec's line, where the first attempt ends
 * with a final status of its own, is covered by the BeeOS conformance tests.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../adapters/beeos/projection.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { ALICE, createTask, envelopesOf, getJson, startRig, type Rig } from './beeos/support/real-gateway.js';
import { collectSse } from './beeos/support/sse-client.js';

const REOPENED = '#sim {"reopen":true,"chunks":3}';
const ATTEMPT_TEXT = 'chunk 1 chunk 2 chunk 3';

let sim: SimulatedCapsule | undefined;
let rig: Rig | undefined;
let gw: TestGateway | undefined;
afterEach(async () => {
  await rig?.close();
  await gw?.close();
  await sim?.stop();
  rig = gw = sim = undefined;
});

interface FlueHistory {
  messages: { id: string; role: string; submissionId?: string; parts: { type: string; text?: string }[] }[];
  settlements: { submissionId: string; outcome: string }[];
}

describe.each(['0.5', '0.6'] as const)('a reopened task on %s', (release) => {
  it('BeeOS: two completed replies, one per attempt, and the task ends at its one final', async () => {
    sim = await startSimulator({ release, heartbeatMs: 1_000 });
    rig = await startRig({ sim });
    const t = await createTask(rig, REOPENED);
    const res = await collectSse(`${rig.api}/tasks/${t.taskId}/events`, ALICE, (e) => e.event === 'end');
    expect(JSON.parse(res.events.at(-1)?.data ?? '')).toEqual({ reason: 'task_terminal' });
    const streamed = envelopesOf<Envelope>(res.events);
    const done = streamed.filter((e) => e.type === 'agent_reply' && e.state === 'completed');
    expect(done.map((e) => e.body)).toEqual([ATTEMPT_TEXT, ATTEMPT_TEXT]);
    expect(done[0]!.message_id).not.toBe(done[1]!.message_id);
    // No streaming envelope of either reply carries both attempts' text.
    expect(streamed.filter((e) => typeof e.body === 'string' && e.body.length > ATTEMPT_TEXT.length)).toEqual(
      [],
    );
    // The live stream ended at the one final, after the second attempt: a page read agrees.
    const page = await getJson<{ messages: Envelope[] }>(`${rig.api}/tasks/${t.taskId}/messages`);
    expect(page.body.data.messages).toEqual(streamed);
    const status = await getJson<{ status: string }>(`${rig.api}/tasks/${t.taskId}`);
    expect(status.body.data.status).toBe('completed');
  });

  it('Flue: one assistant message per attempt, the submission settled once, at the final', async () => {
    sim = await startSimulator({ release });
    gw = await startTestGateway({ capsules: { c: sim.url } });
    const admitted = await fetch(`${gw.baseUrl}/flue/c/conv`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'user', body: REOPENED }),
    });
    expect(admitted.status).toBe(202);
    const { submissionId, offset } = (await admitted.json()) as { submissionId: string; offset: string };
    // Long-poll the updates until the settlement arrives (each poll answers as soon as there is news).
    let cursor = offset;
    for (let polls = 0; polls < 100; polls++) {
      const res = await fetch(`${gw.baseUrl}/flue/c/conv?view=updates&offset=${cursor}&live=long-poll`);
      const text = await res.text();
      cursor = res.headers.get('stream-next-offset') ?? cursor;
      if (text.includes('"submission-settled"')) break;
    }
    const history = (await (await fetch(`${gw.baseUrl}/flue/c/conv?view=history`)).json()) as FlueHistory;
    const assistant = history.messages.filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text))).toEqual([
      [ATTEMPT_TEXT],
      [ATTEMPT_TEXT],
    ]);
    expect(new Set(assistant.map((m) => m.id)).size).toBe(2);
    expect(assistant.every((m) => m.submissionId === submissionId)).toBe(true);
    expect(history.settlements).toEqual([{ submissionId, outcome: 'completed' }]);
  });
});
