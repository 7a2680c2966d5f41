/**
 * A read costs what it reads (the reads bench, scale-reads.ts): one BeeOS task's
 * `GET …/tasks/{id}/messages?since=0` on Redis, then again after 40,000 records of a task whose
 * context the gateway never saw (text frames of a task with no status in the log), then again after
 * 40,000 records of another context. The read task is the same in all three; only the others grow.
 * Target: independent of them (≤ 2×, reads of a few ms on a shared machine).
 */
import { randomBytes } from 'node:crypto';
import { LogWriter } from '../../src/log/log-writer.js';
import type { LogEntry } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import type { SimulatedCapsule } from '../../src/simulator/index.js';
import { median, startBenchGateway, until } from './scale-gateway.js';
import type { Figure } from './scale-summary.js';

const CAPSULE = 'u';

/** Append `count` entries made by `make`, flushed every few thousand (the writer's own batching). */
const appendMany = async (redisUrl: string, count: number, make: (i: number) => LogEntry): Promise<void> => {
  const store = new RedisStore(redisUrl, { retention: { maxRecords: 0, maxAgeMs: 0 } });
  const writer = new LogWriter(store, { maxPendingEntries: 1_000_000, trimIntervalMs: 0 });
  try {
    for (let done = 0; done < count;) {
      const batch = Math.min(5000, count - done);
      await Promise.all(Array.from({ length: batch }, (_, k) => writer.append(CAPSULE, make(done + k))));
      done += batch;
    }
    await writer.flush();
  } finally {
    await writer.close();
    await store.close();
  }
};

const text = (task: string, i: number): LogEntry => ({
  kind: 'frame',
  event: 'text',
  upstreamId: String(BigInt(2) ** BigInt(62) - BigInt(1 + i)),
  data: JSON.stringify({ id: task, text: `chunk ${i} of a task whose status was never seen`, final: false }),
  receivedAt: Date.now(),
});

const submission = (contextId: string, i: number): LogEntry => ({
  kind: 'submission',
  protocol: 'flue',
  owner: null,
  contextId,
  messageId: `msg-other-${i}`,
  text: `message ${i} of another conversation`,
  receivedAt: Date.now(),
});

export const benchUnattributedReads = async (opts: {
  redisUrl: string;
  sim: SimulatedCapsule;
  runs: number;
  records: number;
}): Promise<Figure[]> => {
  const gw = await startBenchGateway(
    { capsules: [{ id: CAPSULE, url: opts.sim.url }], store: { retention: { maxRecords: 0, maxAgeMs: 0 } } },
    opts.redisUrl,
  );
  try {
    const root = `${gw.baseUrl}/api/v1/agents/${CAPSULE}/tasks`;
    await until(async () => opts.sim.watchers >= 1, 30_000, 'the gateway watching the capsule');
    const created = await fetch(root, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'hello' }),
    });
    const body = (await created.json()) as { data?: { task_id?: string } };
    const taskId = body.data?.task_id;
    if (!taskId) throw new Error(`BeeOS task: HTTP ${created.status} ${JSON.stringify(body)}`);
    await opts.sim.idle();
    const url = `${root}/${taskId}/messages?since=0`;
    let bytes = -1;
    const read = async (): Promise<number> => {
      const samples: number[] = [];
      for (let r = 0; r <= opts.runs; r++) {
        const t0 = performance.now();
        const res = await fetch(url, { signal: AbortSignal.timeout(120_000) });
        const answer = await res.text();
        if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status} ${answer.slice(0, 200)}`);
        if (bytes >= 0 && answer.length !== bytes)
          throw new Error(`the task's answer changed: ${answer.length} bytes`);
        bytes = answer.length;
        if (r > 0) samples.push(performance.now() - t0); // the first read warms up (JIT, the index)
      }
      return median(samples);
    };
    await until(async () => (await fetch(url)).status === 200, 30_000, 'the task readable');
    const fresh = await read();
    const unknownTask = `tsk_${randomBytes(16).toString('hex')}`;
    await appendMany(opts.redisUrl, opts.records, (i) => text(unknownTask, i));
    const afterUnknown = await read();
    await appendMany(opts.redisUrl, opts.records, (i) =>
      submission(`conv_other_${randomBytes(4).toString('hex')}`, i),
    );
    const afterOther = await read();
    const n = opts.records.toLocaleString('en');
    const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toPrecision(2));
    console.table([
      { log: 'the task alone', 'BeeOS task messages ms': ms(fresh) },
      { log: `+ ${n} records of an unattributed task`, 'BeeOS task messages ms': ms(afterUnknown) },
      { log: `+ ${n} records of other contexts`, 'BeeOS task messages ms': ms(afterOther) },
    ]);
    return [
      ['an unattributed task', afterUnknown],
      ['other contexts', afterOther],
    ].map(([what, after]) => ({
      figure: `BeeOS task read, + ${n} records of ${what as string} vs alone`,
      target: 'independent (≤ 2×)',
      measured: `${ms(after as number)} ms vs ${ms(fresh)} ms (${((after as number) / fresh).toFixed(1)}×)`,
      met: (after as number) / fresh <= 2,
    }));
  } finally {
    await gw.stop();
  }
};
