/**
 * The BeeOS live feed under store faults, on a real redis-server: restarted from an older snapshot
 * (the log went backwards: the hub ends its listeners with store_error), and stopped for a few
 * seconds under live streams. Each stream either continues exactly or ends without `end` and,
 * reconnecting with `since`, gets exactly the rest (the whole-log projector is the oracle).
 */
import { afterEach, describe, expect, it } from 'vitest';
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

const isMessage = (e: SseEvent): boolean => e.event === 'message';
const envelopes = (events: SseEvent[]): Envelope[] =>
  events.filter(isMessage).map((e) => JSON.parse(e.data) as Envelope);

const openConversation = async (r: Rig): Promise<string> => {
  const res = await postJson(`${r.api}/conversations`, {});
  return ((await res.json()) as { data: { conversation_id: string } }).data.conversation_id;
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
});
