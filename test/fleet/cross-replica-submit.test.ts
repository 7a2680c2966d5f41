/**
 * Submissions on the replica that does NOT ingest the capsule (two replicas, one real Redis). A
 * queued task starts after its `message/stream` closed on another task's final status; only the
 * watch shows its first frame, and the watch is the owner's: the submitting replica must see it in
 * the log (before: it waited for a frame that never came and answered `unreachable`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { testRedisUrl } from '../support/redis.js';
import {
  capsuleReceives,
  capsulesOf,
  startCrossReplica,
  until,
  type CrossReplicaRig,
} from './cross-replica-rig.js';

const redisUrl = testRedisUrl();
let rig: CrossReplicaRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const rpc = (url: string, body: unknown) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

interface PollRecord {
  kind: string;
  event?: string;
  data?: string;
}

/** The capsule's log as the given replica serves it (native poll from the start). */
const logOf = async (baseUrl: string, capsule: string): Promise<PollRecord[]> => {
  const res = await fetch(`${baseUrl}/murmur/${capsule}/poll?after=0&limit=1000`);
  return ((await res.json()) as { records: PollRecord[] }).records;
};

/** Hold the capsule with a running task; cancel it once `text` is queued behind it. */
const queueBehindHeldTask = async (r: CrossReplicaRig, text: string, submit: () => Promise<Response>) => {
  const held = r.sim.submit('#sim {"hold":true}');
  const arrived = capsuleReceives(r.sim, text);
  const answer = submit();
  await arrived;
  const cancel = await rpc(`${r.other.baseUrl}/murmur/${r.capsule}/`, {
    jsonrpc: '2.0',
    id: 1,
    method: 'tasks/cancel',
    params: { id: held.taskId },
  });
  expect(cancel.status).toBe(200);
  return answer;
};

describe.skipIf(!redisUrl)('submissions on a replica that does not ingest the capsule', () => {
  it('BeeOS: a task queued behind another starts and completes (not a 60 s timeout)', async () => {
    rig = await startCrossReplica(redisUrl!, { sim: { taskAcceptance: 'queue' } });
    const r = rig;
    const text = 'queued on the other replica';
    const res = await queueBehindHeldTask(r, text, () =>
      rpc(`${r.other.baseUrl}/api/v1/agents/${r.capsule}/tasks`, { message: text }),
    );
    expect(res.status).toBe(202);
    const { data } = (await res.json()) as { data: { task_id: string } };
    // Followed on the other replica and on the owner: the same completed task.
    for (const gw of [r.other, r.owner]) {
      const done = await until(async () => {
        const got = (await (
          await fetch(`${gw.baseUrl}/api/v1/agents/${r.capsule}/tasks/${data.task_id}`)
        ).json()) as { data: { status: string; result?: string } };
        return got.data.status === 'completed' ? got.data : undefined;
      }, 10_000);
      expect(done.result).toBe(`Echo: ${text}`);
    }
  }, 40_000);

  it('native message/stream: a queued task is accepted, then completes in the log', async () => {
    rig = await startCrossReplica(redisUrl!, { sim: { taskAcceptance: 'queue' } });
    const r = rig;
    const text = 'native queued on the other replica';
    const contextId = 'ctx_native_queued';
    const res = await queueBehindHeldTask(r, text, () =>
      rpc(`${r.other.baseUrl}/murmur/${r.capsule}/`, {
        jsonrpc: '2.0',
        id: 7,
        method: 'message/stream',
        params: { message: { messageId: 'm-native-1', role: 'user', parts: [{ text }], contextId } },
      }),
    );
    expect(res.status).toBe(200);
    const body = await res.text();
    expect(body).not.toContain('unreachable');
    const completed = await until(async () => {
      const records = await logOf(r.other.baseUrl, r.capsule);
      return records.find(
        (rec) => rec.event === 'status' && rec.data?.includes(contextId) && rec.data.includes('"completed"'),
      );
    }, 10_000);
    expect(completed).toBeDefined();
  }, 40_000);

  it("the capsule's conversation_mode is known on the replica that never read its ack (from the log)", async () => {
    rig = await startCrossReplica(redisUrl!, { sim: { conversationMode: 'threaded' } });
    const r = rig;
    const mode = await until(async () => {
      const row = (await capsulesOf(r.other)).capsules.find((c) => c.id === r.capsule);
      return row?.conversation_mode === 'threaded' ? row.conversation_mode : undefined;
    }, 5_000);
    expect(mode).toBe('threaded');
  }, 30_000);
});
