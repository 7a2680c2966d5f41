/**
 * A store that loses a capsule's log state (its meta key deleted on a real Redis) starts a new
 * epoch whose offsets continue above every offset handed out, opening with a store-reset fact.
 * Every surface then says so in its own words, live and to a client resuming from an old cursor:
 * native `gap` (reason store-reset), poll `gap` possibly_missing, BeeOS `backfill_truncated`,
 * Flue `416 stream_offset_gone`. Nothing of the old epoch is replayed again as if it were new.
 */
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createFlueClient } from '@flue/sdk';
import type { RedisStore } from '../../src/log/redis-store.js';
import { postJson } from '../support/http-json.js';
import { startRedisGateway } from '../support/redis-gateway.js';
import { redisServerAvailable } from '../support/redis-server.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';

/** A raw streaming read: text so far, and a wait for a pattern in it. */
const stream = async (url: string, headers: Record<string, string> = {}) => {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: ac.signal });
  const reader = res.body!.getReader();
  let text = '';
  const decoder = new TextDecoder();
  const until = async (re: RegExp): Promise<string> => {
    while (!re.test(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended before ${re}: ${text.slice(-500)}`);
      text += decoder.decode(value);
    }
    return text;
  };
  return { status: res.status, until, text: () => text, close: () => ac.abort() };
};

const RESET_GAP = /event: gap\ndata: \{"first_available_id":(\d+),"reason":"store-reset"\}/;

describe.skipIf(!haveRedis)('a new epoch (the Redis meta key lost)', () => {
  it('is signalled by every surface, live and on resume from an old cursor', async () => {
    const { redis, gw } = await startRedisGateway({
      gateway: { config: { longPollMaxMs: 20_000, heartbeatMs: 1_000 } },
    });
    const api = `${gw.baseUrl}/api/v1/agents/cap`;

    // Old epoch: a BeeOS conversation with one answered turn, a Flue conversation, a native watcher.
    const conv = (
      (await (await postJson(`${api}/conversations`, {})).json()) as { data: { conversation_id: string } }
    ).data.conversation_id;
    const bee = await stream(`${api}/conversations/${conv}/events`);
    expect((await postJson(`${api}/conversations/${conv}/messages`, { message: 'one' })).status).toBe(202);
    await bee.until(/"stop_reason":"end_turn"/);
    const flueUrl = `${gw.baseUrl}/flue/cap/fc`;
    const flue = createFlueClient({ url: flueUrl });
    await flue.wait(await flue.send({ message: { kind: 'user', body: 'hi' } }));
    const oldFlueOffset = (await fetch(flueUrl, { method: 'HEAD' })).headers.get('stream-next-offset')!;
    const old = await gw.core.position('cap');
    const lastBeeOffset = Math.max(...[...bee.text().matchAll(/"offset":(\d+)/g)].map((m) => Number(m[1])));
    const watch = await stream(`${gw.baseUrl}/murmur/cap/events`);
    await watch.until(new RegExp(`id: ${old.head}\\n`));
    const parkedPoll = fetch(`${gw.baseUrl}/murmur/cap/poll?after=${old.head}&wait=20`);
    const parkedFlue = fetch(`${flueUrl}?view=updates&offset=${oldFlueOffset}&live=long-poll`);

    // The store loses the capsule's counter and epoch; the next append fences it with a new epoch.
    const admin = new Redis(redis.url);
    await admin.del((gw.gateway.store as RedisStore).keys('cap').meta);
    await admin.quit();
    expect((await postJson(`${api}/conversations/${conv}/messages`, { message: 'two' })).status).toBe(202);

    // Native watcher (live): a gap naming the store reset, then the new epoch's frames.
    const live = await watch.until(RESET_GAP);
    const firstNew = Number(RESET_GAP.exec(live)![1]);
    expect(firstNew).toBeGreaterThan(old.head + 1);
    const now = await gw.core.position('cap');
    expect(now.epoch).not.toBe(old.epoch);
    // Native resume from the old cursor: the same gap first, nothing of the old epoch again.
    const resumed = await stream(`${gw.baseUrl}/murmur/cap/events`, { 'Last-Event-ID': String(old.head) });
    const text = await resumed.until(RESET_GAP);
    expect(text).not.toMatch(new RegExp(`id: (${old.first}|${old.head})\\n`));
    resumed.close();
    watch.close();

    // Poll: parked across the reset, and a fresh poll from the old cursor.
    for (const res of [await parkedPoll, await fetch(`${gw.baseUrl}/murmur/cap/poll?after=${old.head}`)]) {
      expect(res.status).toBe(200);
      const body = (await res.json()) as { records: { offset: number }[]; gap: unknown; epoch: number };
      expect(body.gap).toEqual({
        reason: 'possibly_missing',
        first_available: firstNew,
        fact_offset: firstNew - 1,
        missing_reason: 'store-reset',
      });
      expect(body.records[0]!.offset).toBe(firstNew - 1);
    }

    // BeeOS: the live stream and a reconnect from the old offset both get backfill_truncated.
    const truncated = /event: backfill_truncated\ndata: (\{[^\n]*\})/;
    const liveBee = JSON.parse(truncated.exec(await bee.until(truncated))![1]!) as Record<string, number>;
    expect(liveBee).toMatchObject({ oldest_redis_offset: (firstNew - 1) * 4, since: 0 });
    bee.close();
    const again = await stream(`${api}/conversations/${conv}/events?since=${lastBeeOffset}`);
    const againText = await again.until(/event: replay_complete/);
    expect(JSON.parse(truncated.exec(againText)![1]!)).toMatchObject({
      oldest_redis_offset: (firstNew - 1) * 4,
      since: lastBeeOffset,
    });
    again.close();

    // Flue: the old-epoch offset is gone, parked or asked afresh; the client restarts from -1.
    for (const res of [
      await parkedFlue,
      await fetch(`${flueUrl}?view=updates&offset=${oldFlueOffset}`),
      await fetch(`${flueUrl}?view=updates&offset=${oldFlueOffset}&live=sse`),
    ]) {
      expect(res.status).toBe(416);
      expect(((await res.json()) as { error: { type: string } }).error.type).toBe('stream_offset_gone');
    }
    const fresh = await fetch(`${flueUrl}?view=updates&offset=-1`);
    expect(fresh.status).toBe(200);
  }, 60_000);
});
