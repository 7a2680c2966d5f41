/**
 * End-to-end ingest: a capsule simulator in its own process (as a real capsule would be) bursts one
 * task of N text chunks; the figure is frames/s from submitting the task to every frame durable in the
 * store, through the real watch connection, reconciliation and log writer. Frames the capsule dropped
 * because the gateway lagged (the spec's 128-frame rule) are counted as lost.
 */
import { randomUUID } from 'node:crypto';
import { LogWriter } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { LogStore } from '../../src/log/store.js';
import type { LogRecord } from '../../src/log/record.js';
import { CapsuleUpstream } from '../../src/upstream/capsule-upstream.js';
import { startSimulatorProcess, submitTask } from '../support/simulator-process.js';

export interface IngestResult {
  store: string;
  framesPerSec: number;
  /** Chunks the capsule wrote that never reached the log, over all runs. */
  lost: number;
}

const isCompleted = (rec: LogRecord, taskId: string): boolean =>
  rec.kind === 'frame' &&
  rec.event === 'status' &&
  rec.data.includes(taskId) &&
  rec.data.includes('"state":"completed"');

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const runOnce = async (
  store: LogStore,
  url: string,
  chunks: number,
): Promise<{ fps: number; lost: number }> => {
  const capsule = `ingest-${randomUUID().slice(0, 8)}`;
  const writer = new LogWriter(store, { trimIntervalMs: 0 });
  const upstream = new CapsuleUpstream({ capsule, url, writer, store });
  upstream.start();
  let head = 0;
  // Attached: the first `upstream-connected` fact is durable (waitAfter wakes on the append).
  while (head === 0) head = (await store.waitAfter(capsule, 0, 1, 1_000)).position.head;
  const start = performance.now();
  // Only this task's frames count: a cold attach replays earlier runs' frames from the capsule buffer.
  const { taskId, drained } = await submitTask(url, `#sim {"chunks":${chunks},"burst":true}`);
  // Timed by polling the head (a position call), not by reading the records back: decoding every
  // record in this process would bill the bench's own reader to the ingest path. The task is done
  // when its final status is among the newest records; counting what arrived happens after the clock.
  let last = head;
  let quietSince = performance.now();
  let end = 0;
  while (!end) {
    await new Promise((r) => setTimeout(r, 5));
    const now = (await store.position(capsule)).head;
    if (now === last) {
      if (performance.now() - quietSince > 5_000) break; // quiet for 5 s: whatever is missing was lost
      continue;
    }
    quietSince = performance.now();
    last = now;
    if (now - head < chunks) continue;
    const tail = await store.read(capsule, now - 3, 3);
    if (tail.records.some((rec) => isCompleted(rec, taskId))) end = performance.now();
  }
  const elapsed = ((end || performance.now()) - start) / 1000;
  let seen = 0;
  for (let after = head; after < last;) {
    const page = await store.read(capsule, after, 10_000);
    if (page.records.length === 0) break;
    for (const rec of page.records)
      if (
        rec.kind === 'frame' &&
        rec.event === 'text' &&
        rec.data.includes(taskId) &&
        rec.data.endsWith('"final":false}')
      )
        seen++;
    after = page.records[page.records.length - 1]!.offset;
  }
  await drained;
  await upstream.stop();
  await writer.flush();
  await writer.close();
  return { fps: seen / elapsed, lost: chunks - seen };
};

export const benchIngest = async (opts: {
  redisUrl?: string;
  chunks: number;
  runs: number;
}): Promise<IngestResult[]> => {
  const out: IngestResult[] = [];
  const stores: [string, () => LogStore][] = [['memory', () => new MemoryStore()]];
  if (opts.redisUrl) stores.push(['redis', () => new RedisStore(opts.redisUrl!)]);
  const sim = await startSimulatorProcess();
  try {
    for (const [name, make] of stores) {
      const fps: number[] = [];
      let lost = 0;
      for (let i = 0; i < opts.runs; i++) {
        const store = make();
        const r = await runOnce(store, sim.url, opts.chunks);
        await store.close();
        fps.push(r.fps);
        lost += r.lost;
      }
      out.push({ store: name, framesPerSec: Math.round(median(fps)), lost });
    }
  } finally {
    sim.child.kill('SIGTERM');
  }
  return out;
};
