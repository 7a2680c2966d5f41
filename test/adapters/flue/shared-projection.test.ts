/**
 * The shared live projection (one per conversation, fed by one hub subscription per capsule) must
 * deliver exactly what the old per-connection projection did: every SSE follower and long-poll
 * loop of a conversation receives, in order and once, the chunks a fresh projector over the whole
 * capsule log produces after its offset. Several conversations interleave with native tasks of
 * other contexts; followers join from -1, from a snapshot, mid-workload and ahead of the feed.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import { startSimulator, type SimulatedCapsule } from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { testRedisUrl, uniqueCapsule } from '../../support/redis.js';
import { SseReader, longPollUntil, offsetNumber, wholeCapsuleChunks } from './live-clients.js';

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const script = (i: number): string =>
  `#sim ${JSON.stringify({ chunks: 3 + (i % 4), thinking: 1, tools: i % 3, turns: i % 3 ? 2 : 1, delayMs: 5 })}`;

describe.each(['memory', 'redis'] as const)('shared Flue projection (%s store)', (store) => {
  let redisUrl: string | undefined;
  beforeAll(() => {
    redisUrl = store === 'redis' ? testRedisUrl() : undefined;
    if (store === 'redis' && !redisUrl && process.env.REQUIRE_REDIS === '1')
      throw new Error('Redis required');
  });

  const setup = async () => {
    const sim: SimulatedCapsule = await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 1 });
    closers.push(() => sim.stop());
    const capsule = uniqueCapsule('flue-shared');
    const gw: TestGateway = await startTestGateway({
      capsules: { [capsule]: sim.url },
      config: { longPollMaxMs: 300, idleControlMs: 200, heartbeatMs: 100 },
      ...(redisUrl ? { redisUrl } : {}),
    });
    closers.push(() => gw.close());
    return { sim, gw, capsule, url: (conv: string) => `${gw.baseUrl}/flue/${capsule}/${conv}` };
  };

  it('50 SSE followers and 5 long-poll loops over 5 interleaved conversations get exactly their chunks, once', async () => {
    if (store === 'redis' && !redisUrl) return;
    const { sim, gw, capsule, url } = await setup();
    const conversations = ['c0', 'c1', 'c2', 'c3', 'c4'];
    const clients = conversations.map((c) => createFlueClient({ url: url(c) }));
    // Each conversation exists, with one settled turn, before anyone follows.
    await Promise.all(
      clients.map(async (client, i) =>
        client.wait(await client.send({ message: { kind: 'user', body: `hello ${i}` } })),
      ),
    );
    const readers: { conv: string; reader: SseReader }[] = [];
    const follow = (conv: string, offset: string): void => {
      const reader = new SseReader(url(conv), offset);
      closers.push(() => reader.close());
      readers.push({ conv, reader });
    };
    // Group 1: from -1 and from each conversation's snapshot offset.
    for (const conv of conversations) {
      const snapshot = (await (await fetch(url(conv))).json()) as { offset: string };
      for (let k = 0; k < 3; k++) follow(conv, '-1');
      for (let k = 0; k < 3; k++) follow(conv, snapshot.offset);
    }
    let target: number | null = null;
    const stopPolls = new AbortController();
    closers.push(() => stopPolls.abort());
    const polls = conversations.map((conv) => longPollUntil(url(conv), '-1', () => target, stopPolls.signal));
    // A test that fails before the polls end leaves them to the abort above, not unhandled.
    for (const poll of polls) poll.catch(() => undefined);
    // Interleaved turns in every conversation, native tasks of other contexts between them.
    const round = async (r: number) => {
      const noise = sim.submit(`#sim {"chunks":4,"delayMs":2}`, `native-${r}`);
      const admissions = await Promise.all(
        clients.map((client, i) => client.send({ message: { kind: 'user', body: script(r * 5 + i) } })),
      );
      await Promise.all(admissions.map((a, i) => clients[i]!.wait(a)));
      await noise.done;
    };
    await round(0);
    // Group 2: mid-workload, from the head (HEAD) and from -1 again, while the feed is running.
    for (const conv of conversations) {
      const head = (await fetch(url(conv), { method: 'HEAD' })).headers.get('stream-next-offset')!;
      follow(conv, head);
      follow(conv, head);
      follow(conv, '-1');
    }
    // While all follow: one hub subscription for the whole surface, no per-connection waits.
    const stats = gw.gateway.hub.capsuleStats(capsule);
    expect(stats.subscribers).toBe(1);
    await round(1);
    // Group 3: one more per conversation, joining while the last round runs.
    const last = round(2);
    for (const conv of conversations)
      follow(conv, (await fetch(url(conv), { method: 'HEAD' })).headers.get('stream-next-offset')!);
    await last;
    await sim.idle();
    const head = (await gw.core.position(capsule)).head;
    target = head;
    expect(readers).toHaveLength(50);
    await Promise.all(readers.map(({ reader }) => reader.reached(head)));
    const polled = await Promise.all(polls);

    for (const { conv, reader } of readers) {
      // A late record (after the head read above) may have reached some followers: compare
      // through what each follower was told it holds.
      expect(reader.next).toBeGreaterThanOrEqual(head);
      const expected = await wholeCapsuleChunks(
        gw.core,
        capsule,
        conv,
        offsetNumber(reader.offset),
        reader.next,
      );
      expect(expected.length).toBeGreaterThan(0);
      expect(reader.chunks).toEqual(expected);
      // Every data event is followed by its control event.
      reader.events.forEach((name, i) => {
        if (name === 'data') expect(reader.events[i + 1]).toBe('control');
      });
    }
    for (const [i, conv] of conversations.entries()) {
      const next = offsetNumber(polled[i]!.next);
      expect(next).toBeGreaterThanOrEqual(head);
      expect(polled[i]!.chunks).toEqual(await wholeCapsuleChunks(gw.core, capsule, conv, 0, next));
    }
    // And what they accumulated equals history.
    for (const conv of conversations) {
      const history = (await (await fetch(url(conv))).json()) as { settlements: unknown[] };
      expect(history.settlements).toHaveLength(4);
    }
  }, 60_000);
});
