/**
 * A reconnect's replay held by the network for 1.5 s partway (a real TCP proxy
 * between ingestor and capsule) is appended exactly once — no duplicate, nothing lost.
 */
import { describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/log/redis-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { settle, startRig } from './harness.js';
import { compareLog, readAll } from './log-vs-written.js';
import { startStallProxy } from './stall-proxy.js';

describe.skipIf(!testRedisUrl())('a replay stalled partway by the network', () => {
  it('held 1.5 s inside the replay: every frame logged once, in order', async () => {
    const sim = stopAfterTest(await startSimulator({ taskAcceptance: 'queue' }));
    const proxy = stopAfterTest(await startStallProxy(sim.url));
    const store = stopAfterTest(new RedisStore(testRedisUrl()!));
    const capsule = uniqueCapsule('stall');
    const rig = stopAfterTest(startRig(sim, store, capsule, { url: proxy.url }));
    await rig.connected();
    // ~300 replayable frames (≈ 40 KB of replay), all stored before the cut.
    for (let i = 0; i < 10; i++) await sim.submit('#sim {"chunks":25,"thinking":3,"delayMs":0}').done;
    await settle(sim, store, capsule, rig);

    const before = rig.ingestor.state().reconnects;
    const released = proxy.stallNext(12_000, 1500); // the ack and a slice of the replay, then 1.5 s of nothing
    proxy.cutAll();
    await rig.reconnectedAfter(before);
    await released;
    await sim.submit('#sim {"chunks":5}').done; // live after the replay
    await settle(sim, store, capsule, rig);

    const records = await readAll(store, capsule);
    const cmp = compareLog(records, sim.written);
    expect(cmp.problems).toEqual([]); // a duplicate is a problem
    expect(cmp.covered).toEqual([]);
    expect(cmp.matched).toBe(sim.written.length);
  });
});
