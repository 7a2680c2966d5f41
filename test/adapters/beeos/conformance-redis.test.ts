/**
 * BeeOS black-box conformance on Redis: a gateway restart on the same Redis rebuilds the channel
 * registry from the log (owners still enforced), offsets resume exactly, and a task followed across
 * the restart is reassembled with nothing seen twice or missed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { startSimulator } from '../../../src/simulator/index.js';
import type { SimulatedCapsule } from '../../../src/simulator/index.js';
import { testRedisUrl, uniqueCapsule } from '../../support/redis.js';
import {
  ALICE,
  BOB,
  capsuleStatuses,
  createTask,
  envelopesOf,
  getJson,
  openSse,
  startRig,
} from './support/real-gateway.js';
import type { Rig } from './support/real-gateway.js';
import { collectSse } from './support/sse-client.js';

const redisUrl = testRedisUrl();
let rig: Rig | undefined;
let sim: SimulatedCapsule | undefined;
afterEach(async () => {
  await rig?.close();
  await sim?.stop();
  rig = undefined;
  sim = undefined;
});

const untilEnd = (e: { event: string }): boolean => e.event === 'end';

describe.skipIf(!redisUrl)('BeeOS conformance on Redis, across a gateway restart', () => {
  it('the registry comes back from the log: ACL holds, offsets resume, a task spans the restart', async () => {
    sim = await startSimulator({ heartbeatMs: 1_000 });
    const capsule = uniqueCapsule('bee');
    rig = await startRig({ redisUrl: redisUrl!, capsule, sim });

    // Before the restart: a finished task and a task still running.
    const done = await createTask(rig, 'before the restart');
    const before = await collectSse(`${rig.api}/tasks/${done.taskId}/events`, ALICE, untilEnd);
    const envsBefore = envelopesOf<Envelope>(before.events);
    const long = await createTask(rig, '#sim {"chunks":80,"delayMs":8}');
    const seen: Envelope[] = [];
    const first = await openSse(`${rig.api}/tasks/${long.taskId}/events`, { headers: ALICE });
    for (const ev of await first.until(
      (e) =>
        e.event === 'message' && JSON.parse(e.data).type === 'agent_reply' && JSON.parse(e.data).body !== '',
    )) {
      if (ev.event === 'message') seen.push(JSON.parse(ev.data) as Envelope);
    }
    first.close(); // the client's connection drops with the gateway
    // The task really spans the restart: the capsule has not finished it yet.
    const finished = (): boolean =>
      capsuleStatuses(sim!, long.contextId).some((s) => s.status.state === 'completed');
    expect(finished()).toBe(false);
    await rig.close();

    rig = await startRig({ redisUrl: redisUrl!, capsule, sim });
    const url = `${rig.api}/tasks/${done.taskId}`;
    // Owner ACL from the rebuilt registry.
    expect((await getJson(url, BOB)).status).toBe(404);
    expect((await getJson(url, BOB)).body.error).toMatchObject({ code: 'agent_not_found' });
    expect((await getJson(url, {})).status).toBe(401);
    expect((await getJson(`${rig.api}/tasks/task_nope`)).status).toBe(404);
    const status = await getJson<{ status: string; result: string }>(url);
    expect(status.body.data).toMatchObject({ status: 'completed', result: 'Echo: before the restart' });
    expect((await fetch(`${url}/events`, { headers: BOB })).status).toBe(404);

    // Offsets resume: the same envelopes at the same offsets, and `since` cuts exactly.
    const after = await collectSse(`${url}/events?since=0`, ALICE, untilEnd);
    expect(envelopesOf(after.events)).toEqual(envsBefore);
    const mid = envsBefore[1] as Envelope;
    const tail = await collectSse(`${url}/events?since=${mid.offset}`, ALICE, untilEnd);
    expect(envelopesOf(tail.events)).toEqual(envsBefore.slice(2));

    // The long task, resumed on the new gateway from the last offset the client saw.
    const last = seen.at(-1) as Envelope;
    const rest = await collectSse(
      `${rig.api}/tasks/${long.taskId}/events?since=${last.offset}`,
      ALICE,
      untilEnd,
    );
    expect(JSON.parse(rest.events.at(-1)?.data ?? '')).toEqual({ reason: 'task_terminal' });
    const all = [...seen, ...envelopesOf<Envelope>(rest.events)];
    const offsets = all.map((e) => e.offset);
    expect(new Set(offsets).size).toBe(offsets.length);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThan(offsets[i - 1] ?? -1);
    const response = capsuleStatuses(sim, long.contextId).find((s) => s.status.state === 'completed')?.status
      .response;
    expect(all.at(-1)).toMatchObject({ type: 'agent_reply', state: 'completed', body: response });
    const whole = await collectSse(`${rig.api}/tasks/${long.taskId}/events`, ALICE, untilEnd);
    expect(envelopesOf(whole.events)).toEqual(all);
  });
});
