/**
 * Ingestion never waits for serving: the gateway's main event loop blocked for 2 s (a busy
 * loop in this process, where the ingestor runs) during a 2,000-frame burst loses nothing. The capsule
 * runs in a child process (as a real one would), so it keeps writing while we are stalled; it drops
 * frames from a reader more than 128 frames behind (spec), so a stalled read would show as loss.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { LogWriter } from '../../src/log/log-writer.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { CapsuleIngestor } from '../../src/upstream/ingestor.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { readAll } from './log-vs-written.js';
import { TEST_READER_TIMEOUT_MS } from '../support/deadlines.js';
import { waitForRecord } from './harness.js';
import { startSimulatorProcess, submitTask } from '../support/simulator-process.js';

describe.skipIf(!testRedisUrl())('the main event loop blocked during a burst', () => {
  let child: ChildProcess | null = null;
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await stop?.();
    child?.kill('SIGTERM');
    child = stop = null;
  });

  it('2 s busy loop during a 2,000-frame burst: every frame is logged', { timeout: 60_000 }, async () => {
    const sim = await startSimulatorProcess(['--acceptance', 'queue']);
    child = sim.child;
    // The backlog the stall leaves takes this process a while to work off: the store's own command
    // deadline (which now retires the connection) is not what this test is about.
    const store = new RedisStore(testRedisUrl()!, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
    const writer = new LogWriter(store);
    const capsule = uniqueCapsule('stall-loop');
    const ingestor = new CapsuleIngestor({ capsule, url: sim.url, writer, store });
    stop = async () => {
      await ingestor.stop();
      await writer.flush();
      await writer.close();
      await store.close();
    };
    ingestor.start();
    await waitForRecord(store, capsule, (r) => r.kind === 'fact' && r.fact === 'upstream-connected');

    const chunks = 2000;
    const { taskId } = await submitTask(sim.url, `#sim {"chunks":${chunks},"delayMs":1}`);
    const until = Date.now() + 2000;
    while (Date.now() < until); // the stall: nothing in this process runs for 2 s

    await waitForRecord(
      store,
      capsule,
      (r) => r.kind === 'frame' && r.data.includes(taskId) && r.data.includes('"state":"completed"'),
      30_000,
    );
    await writer.flush();
    const records = await readAll(store, capsule);
    const texts = records.filter(
      (r) =>
        r.kind === 'frame' &&
        r.event === 'text' &&
        r.data.includes(taskId) &&
        r.data.endsWith('"final":false}'),
    );
    expect(texts.length).toBe(chunks);
    const missing = records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing');
    expect(missing.map((r) => (r as { reason: string }).reason)).toEqual(['cold-attach']);
  });
});
