/**
 * Reads scale with what is read, at the core: GatewayCore.readContext's path (Hub over
 * RedisStore, in this process) for one conversation of T turns in a capsule of N conversations × T
 * turns, N = 10 vs 1,000: the read's latency must not depend on the others. The log is synthetic
 * but shaped like a capsule's (a submission, a status naming the context, thinking, text chunks that
 * name only their task, a final status per turn), conversations interleaved turn by turn. The first
 * read builds the capsule's index (each record read once); the figure is the median of later reads.
 */
import { Hub } from '../../src/hub/hub.js';
import type { LogEntry } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { median } from './scale-gateway.js';
import type { Figure } from './scale-summary.js';

interface CoreRow {
  conversations: number;
  records: number;
  buildMs: number;
  readMs: number;
  resumeMs: number;
  returned: number;
}

const turn = (contextId: string, n: number): LogEntry[] => {
  const task = `tsk_${contextId}_${n}`;
  const frame = (event: string, data: object): LogEntry => ({
    kind: 'frame',
    event,
    upstreamId: '0',
    data: JSON.stringify(data),
    receivedAt: Date.now(),
  });
  const status = (state: string, final: boolean): LogEntry =>
    frame('status', { id: task, context_id: contextId, status: { state, message: 'turn' }, final });
  const text = (t: string): LogEntry => frame('text', { id: task, text: t, final: false });
  return [
    {
      kind: 'submission',
      protocol: 'flue',
      owner: null,
      contextId,
      messageId: `msg_${contextId}_${n}`,
      text: `question ${n}`,
      receivedAt: Date.now(),
    },
    status('working', false),
    frame('thinking', { id: task, text: 'Reading the message', final: false }),
    ...['The', ' answer', ' to', ' question', ` ${n}`].map(text),
    status('completed', true),
  ];
};

const write = async (store: RedisStore, capsule: string, n: number, turns: number): Promise<number> => {
  let batch: LogEntry[] = [];
  let records = 0;
  for (let t = 0; t < turns; t++) {
    for (let c = 0; c < n; c++) {
      batch.push(...turn(`conv${c}`, t));
      if (batch.length >= 5_000) {
        records += (await store.append(capsule, batch)).offsets.length;
        batch = [];
      }
    }
  }
  if (batch.length) records += (await store.append(capsule, batch)).offsets.length;
  return records;
};

export const benchCoreReads = async (opts: {
  redisUrl: string;
  sizes: number[];
  turns: number;
  runs: number;
}): Promise<Figure[]> => {
  const rows: CoreRow[] = [];
  const writer = new RedisStore(opts.redisUrl, { keyPrefix: 'bench-core' });
  const reader = new RedisStore(opts.redisUrl, { keyPrefix: 'bench-core' });
  const hub = new Hub(reader);
  try {
    // JIT warm-up on a small capsule of its own, so the first size measured is not the slower one.
    await write(writer, 'core-warm', 5, 5);
    for (let r = 0; r < 30; r++) await hub.readContext('core-warm', 'conv0', 0, 100_000);
    for (const n of opts.sizes) {
      const capsule = `core${n}`;
      const records = await write(writer, capsule, n, opts.turns);
      let t0 = performance.now();
      let page = await hub.readContext(capsule, 'conv0', 0, 100_000);
      const buildMs = performance.now() - t0;
      const reads: number[] = [];
      const resumes: number[] = [];
      for (let r = 0; r < opts.runs; r++) {
        t0 = performance.now();
        page = await hub.readContext(capsule, 'conv0', 0, 100_000);
        reads.push(performance.now() - t0);
        t0 = performance.now();
        await hub.readContext(capsule, 'conv0', page.next, 100_000);
        resumes.push(performance.now() - t0);
      }
      rows.push({
        conversations: n,
        records,
        buildMs,
        readMs: median(reads),
        resumeMs: median(resumes),
        returned: page.records.length,
      });
    }
  } finally {
    await hub.close();
    await Promise.all([writer.close(), reader.close()]);
  }
  const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toPrecision(2));
  console.table(
    rows.map((r) => ({
      conversations: r.conversations,
      'log records': r.records.toLocaleString('en'),
      'index build ms (first read)': ms(r.buildMs),
      'readContext ms': ms(r.readMs),
      'resume at head ms': ms(r.resumeMs),
      'records returned': r.returned,
    })),
  );
  if (rows.length < 2) return [];
  const [small, big] = [rows[0]!, rows[rows.length - 1]!];
  const ratio = big.readMs / small.readMs;
  return [
    {
      figure: `core readContext (${opts.turns} turns), ${big.conversations} vs ${small.conversations} conversations`,
      target: 'independent (≤ 2×)',
      anchor: `${ms(small.readMs)} ms at ${small.conversations}`,
      measured: `${ms(big.readMs)} ms (${ratio.toFixed(1)}×)`,
      met: ratio <= 2,
    },
  ];
};
