/**
 * Shared per-channel projections on a recorded workload: the real gateway in front of the
 * simulator, interleaved conversations and tasks, listeners opened before, during and after the
 * work at different `since`, with and without deltas. Every listener's stream must equal what a
 * fresh ChannelProjector over the whole capsule log (the old per-connection path) shows.
 */
import { describe, it } from 'vitest';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { startSimulator } from '../../../src/simulator/index.js';
import { expectStreamMatches, oracleOf, readWholeLog } from './support/oracle.js';
import {
  ALICE,
  createTask,
  getJson,
  openSse,
  postJson,
  startRig,
  waitForRecord,
} from './support/real-gateway.js';
import { stopAfterTest } from '../../support/stop-after-test.js';
import type { SseSession } from './support/real-gateway.js';

interface Watch {
  id: string;
  since: number;
  deltas: boolean;
  session: SseSession;
  done: Promise<unknown>;
}

describe('BeeOS shared projections on a simulator workload', () => {
  it('interleaved conversations and tasks: every listener equals the whole-log projector', async () => {
    const sim = stopAfterTest(await startSimulator({ heartbeatMs: 1_000, taskAcceptance: 'queue' }));
    const r = stopAfterTest(await startRig({ sim }));
    const watches: Watch[] = [];
    const watch = async (kind: 'tasks' | 'conversations', id: string, since: number, deltas: boolean) => {
      const q = `since=${since}${deltas ? '&include_deltas=true' : ''}`;
      const session = await openSse(`${r.api}/${kind}/${id}/events?${q}`, { headers: ALICE });
      watches.push({ id, since, deltas, session, done: session.rest() });
    };
    const convs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${r.api}/conversations`, {});
      const id = ((await res.json()) as { data: { conversation_id: string } }).data.conversation_id;
      convs.push(id);
      await watch('conversations', id, 0, i % 2 === 0);
    }
    const tasks: string[] = [];
    let turns = 0;
    for (let round = 0; round < 2; round++) {
      for (const [i, id] of convs.entries()) {
        const msg = `#sim {"chunks":${4 + i},"thinking":1,"tools":${round}}`;
        const res = await postJson(`${r.api}/conversations/${id}/messages`, { message: msg });
        if (res.status === 202) turns++;
        if (round === 1) await watch('conversations', id, 0, i % 2 === 1); // joins mid-stream
      }
      const t = await createTask(r, `#sim {"chunks":${6 + round},"thinking":2,"tools":1}`);
      tasks.push(t.taskId);
      await watch('tasks', t.taskId, 0, round === 0);
      await watch('tasks', t.taskId, 0, round === 1);
    }
    let completed = 0;
    await waitForRecord(r.gw.core, r.capsule, (rec) => {
      if (rec.kind !== 'frame' || rec.event !== 'status') return false;
      const d = JSON.parse(rec.data) as { status: { state: string } };
      if (d.status.state === 'completed') completed++;
      return completed === turns + tasks.length;
    });
    // Late listeners resume from the middle of each channel's history.
    for (const id of [...convs, ...tasks]) {
      const kind = id.startsWith('conv_') ? 'conversations' : 'tasks';
      const page = await getJson<{ messages: Envelope[] }>(
        `${r.api}/${kind}/${id}/messages?include_deltas=true`,
      );
      const mid = page.body.data.messages[Math.floor(page.body.data.messages.length / 2)]?.offset ?? 0;
      await watch(kind, id, mid, true);
      await watch(kind, id, mid, false);
    }
    for (const id of convs) await fetch(`${r.api}/conversations/${id}`, { method: 'DELETE', headers: ALICE });
    await Promise.all(watches.map((w) => w.done));
    const log = await readWholeLog(r.gw.core, r.capsule);
    for (const w of watches) {
      const events = (await w.done) as Awaited<ReturnType<SseSession['rest']>>;
      expectStreamMatches(events, oracleOf(log, r.capsule, w.id), w.since, w.deltas);
    }
  });
});
