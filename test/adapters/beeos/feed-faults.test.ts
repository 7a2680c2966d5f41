/**
 * The BeeOS live feed under store faults, on a real redis-server: restarted from an older snapshot
 * (the log went backwards: the hub ends its listeners with store_error), and stopped for a few
 * seconds under live streams. Each stream either continues exactly or ends without `end` and,
 * reconnecting with `since`, gets exactly the rest (the whole-log projector is the oracle).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { beeosFeedStats } from '../../../adapters/beeos/channel-feeds.js';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { redisServerAvailable, startRedisServer } from '../../support/redis-server.js';
import type { RedisServer } from '../../support/redis-server.js';
import { oracleOf, readWholeLog, expectedFor } from './support/oracle.js';
import { ALICE, createTask, openSse, postJson, startRig } from './support/real-gateway.js';
import type { Rig } from './support/real-gateway.js';
import { readSse } from './support/sse-client.js';
import type { SseEvent } from './support/sse-client.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

let redis: RedisServer | undefined;
let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  await redis?.stop();
  rig = undefined;
  redis = undefined;
});

const waitFor = (pred: () => boolean): Promise<void> =>
  vi.waitFor(() => expect(pred()).toBe(true), { timeout: 30_000, interval: 20 });

const isMessage = (e: SseEvent): boolean => e.event === 'message';
const envelopes = (events: SseEvent[]): Envelope[] =>
  events.filter(isMessage).map((e) => JSON.parse(e.data) as Envelope);

const openConversation = async (r: Rig): Promise<string> => {
  const res = await postJson(`${r.api}/conversations`, {});
  return ((await res.json()) as { data: { conversation_id: string } }).data.conversation_id;
};

/**
 * A client as BeeOS "Streaming" §7 writes one: reconnect with since=lastOffset until `end`
 * (a refused or failed connection is tried again once `ready` says the store is back).
 */
const watch = async (url: string, ready: () => Promise<void>) => {
  const connections: SseEvent[][] = [];
  let since = 0;
  for (let i = 0; i < 50; i++) {
    const events: SseEvent[] = [];
    connections.push(events);
    try {
      const res = await fetch(`${url}?since=${since}`, { headers: ALICE });
      if (res.status !== 200) {
        await res.body?.cancel();
        await ready();
        continue;
      }
      for await (const ev of readSse(res)) {
        if (ev.comment !== undefined && ev.data === '') continue;
        events.push(ev);
        if (isMessage(ev)) since = (JSON.parse(ev.data) as Envelope).offset;
        // `stream_closed`: the gateway ended the stream (it lost its store): resume with since.
        if (ev.event === 'end' && (JSON.parse(ev.data) as { reason: string }).reason === 'stream_closed') {
          await ready();
          break;
        }
        if (ev.event === 'end') return connections;
      }
    } catch {
      await ready();
    }
  }
  throw new Error('too many connections');
};

const turnDone = (e: SseEvent): boolean =>
  isMessage(e) && (JSON.parse(e.data) as Envelope).stop_reason === 'end_turn';

describe.skipIf(!haveRedis)('BeeOS live feed under store faults', () => {
  it('Redis back from an older snapshot: joined streams end without end and resume with since', async () => {
    redis = await startRedisServer();
    rig = await startRig({ redisUrl: redis.url, heartbeatMs: 200 });
    const r = rig;
    const a = await openConversation(r);
    const b = await openConversation(r);
    const streamA = await openSse(`${r.api}/conversations/${a}/events`, { headers: ALICE });
    const streamB = await openSse(`${r.api}/conversations/${b}/events`, { headers: ALICE });
    const seenA = await streamA.until((e) => e.event === 'replay_complete');
    const seenB = await streamB.until((e) => e.event === 'replay_complete');
    expect((await postJson(`${r.api}/conversations/${a}/messages`, { message: 'one' })).status).toBe(202);
    seenA.push(...(await streamA.until(turnDone)));
    await redis.snapshot();
    // After the snapshot: both streams have joined the feed and passed what the snapshot holds.
    expect((await postJson(`${r.api}/conversations/${b}/messages`, { message: 'two' })).status).toBe(202);
    seenB.push(...(await streamB.until(turnDone)));
    expect(beeosFeedStats(r.capsule)).toMatchObject({ feeds: 1, listeners: 2 });
    const resets = beeosFeedStats().resets;

    await redis.stop('SIGKILL');
    await redis.start(); // from the snapshot: the log's head is below what the feed dispatched
    // Old path: the feed followed the log again from above its head and the streams only got
    // keepalives (the test times out). Now: each ends, without `end` (not terminal).
    const restA = await streamA.rest();
    const restB = await streamB.rest();
    for (const rest of [restA, restB]) expect(rest.some((e) => e.event === 'end')).toBe(false);
    expect(beeosFeedStats().resets).toBe(resets + 1);
    expect(beeosFeedStats(r.capsule)).toMatchObject({ feeds: 0, listeners: 0, projections: 0 });

    // Reconnecting with since: since is beyond the head now, so the channel replays from the start
    // of what the log holds, announced by backfill_truncated; then it follows live again.
    const lastB = envelopes([...seenB, ...restB]).at(-1)?.offset ?? 0;
    const again = await openSse(`${r.api}/conversations/${b}/events?since=${lastB}`, { headers: ALICE });
    const replay = await again.until((e) => e.event === 'replay_complete');
    expect(replay[0]?.event).toBe('backfill_truncated');
    expect(JSON.parse(replay[0]?.data ?? '{}')).toMatchObject({ since: lastB });
    expect((await postJson(`${r.api}/conversations/${b}/messages`, { message: 'three' })).status).toBe(202);
    // (The capsule's replay brings turn two back into the new epoch before turn three.)
    const live = await again.until(
      (e) => turnDone(e) && (JSON.parse(e.data) as Envelope).body === 'Echo: three',
    );
    const log = await readWholeLog(r.gw.core, r.capsule);
    expect(envelopes([...replay, ...live])).toEqual(expectedFor(oracleOf(log, r.capsule, b), 0, false));
    again.close();
  }, 60_000);

  it('Redis stopped for seconds under live streams: every stream continues exactly or resumes exactly', async () => {
    redis = await startRedisServer();
    rig = await startRig({ redisUrl: redis.url, heartbeatMs: 200 });
    const r = rig;
    const server = redis;
    let back: () => void = () => undefined;
    let isBack = true;
    let backPromise = Promise.resolve();
    const ready = (): Promise<void> => backPromise;
    // One long task (the capsule runs one at a time), watched by several clients.
    const tasks = [await createTask(r, '#sim {"chunks":120,"delayMs":50}')];
    const watchers = tasks.flatMap((t) =>
      [0, 1, 2, 3, 4].map(() => ({ id: t.taskId, run: watch(`${r.api}/tasks/${t.taskId}/events`, ready) })),
    );
    // Every watcher has joined the feed before the store goes away.
    await waitFor(() => beeosFeedStats(r.capsule).listeners === watchers.length);
    const resets = beeosFeedStats().resets;

    backPromise = new Promise<void>((resolve) => (back = resolve));
    isBack = false;
    server.pause(); // SIGSTOP: unreachable, its data kept
    // More clients arrive during the outage (refused or dropped until the store answers again).
    const late = tasks.flatMap((t) =>
      [0, 1].map(() => ({ id: t.taskId, run: watch(`${r.api}/tasks/${t.taskId}/events`, ready) })),
    );
    // The outage lasts a few seconds, while the capsule keeps writing (the gateway holds its frames).
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    server.resume();
    isBack = true;
    back();

    const all = [...watchers, ...late];
    const results = await Promise.all(all.map((w) => w.run));
    const log = await readWholeLog(r.gw.core, r.capsule);
    for (const [i, w] of all.entries()) {
      const connections = results[i] ?? [];
      const events = connections.flat();
      const oracle = oracleOf(log, r.capsule, w.id);
      // No envelope lost or repeated across the connections, nothing reported missing.
      expect(envelopes(events)).toEqual(expectedFor(oracle, 0, false));
      expect(events.filter((e) => e.event === 'backfill_truncated')).toEqual([]);
      expect(events.at(-1)?.data).toBe(JSON.stringify({ reason: oracle.end }));
      expect(oracle.end).toBe('task_terminal');
    }
    expect(isBack).toBe(true);
    // Every client got its end: nothing of the feed is left behind.
    await waitFor(() => beeosFeedStats(r.capsule).feeds === 0);
    // An outage is not a log that went backwards: the feed dropped nothing.
    expect(beeosFeedStats().resets).toBe(resets);
  }, 120_000);
});
