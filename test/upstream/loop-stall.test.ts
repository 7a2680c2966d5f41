/**
 * Issue 8, "ingestion never waits for serving": the gateway's main event loop blocked for 2 s (a busy
 * loop in this process, where the ingestor runs) during a 2,000-frame burst loses nothing. The capsule
 * runs in a child process (as a real one would), so it keeps writing while we are stalled; it drops
 * frames from a reader more than 128 frames behind (spec), so a stalled read would show as loss.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { LogWriter } from '../../src/log/log-writer.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { CapsuleIngestor } from '../../src/upstream/ingestor.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { readAll } from './log-vs-written.js';
import { waitForRecord } from './harness.js';

const startSimulatorProcess = async (): Promise<{ url: string; child: ChildProcess }> => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli.ts', 'simulate', '--port', '0', '--acceptance', 'queue'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  for await (const line of createInterface({ input: child.stdout! })) {
    const m = /"url":"([^"]+)"/.exec(line);
    if (m?.[1]) return { url: m[1], child };
  }
  throw new Error('simulator process printed no url');
};

/** Submit with message/stream; resolves with the task id once the task started (its stream is then drained). */
const submit = async (url: string, text: string): Promise<string> => {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'message/stream',
      params: { message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } },
    }),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('message/stream ended before the task started');
    buffered += decoder.decode(value, { stream: true });
    const m = /"id":"(tsk_[0-9a-f]+)"/.exec(buffered);
    if (m?.[1]) {
      void (async () => {
        while (!(await reader.read()).done);
      })().catch(() => {});
      return m[1];
    }
  }
};

describe.skipIf(!testRedisUrl())('the main event loop blocked during a burst', () => {
  let child: ChildProcess | null = null;
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await stop?.();
    child?.kill('SIGTERM');
    child = stop = null;
  });

  it('2 s busy loop during a 2,000-frame burst: every frame is logged', { timeout: 60_000 }, async () => {
    const sim = await startSimulatorProcess();
    child = sim.child;
    const store = new RedisStore(testRedisUrl()!);
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
    const taskId = await submit(sim.url, `#sim {"chunks":${chunks},"delayMs":1}`);
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
