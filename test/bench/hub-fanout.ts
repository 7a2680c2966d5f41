/**
 * Hub fan-out to N long-pollers: one capsule, F frames appended at the log writer while N
 * clients follow the log with `GET /murmur/{capsule}/poll?after=…&wait=…`. Prints delivered records/s
 * and the hub's store readers (which must stay at one per capsule), medians of several runs.
 */
import { startTestGateway } from '../support/gateway.js';

export interface HubFanoutRow {
  store: string;
  pollers: number;
  frames: number;
  deliveredPerSec: number;
  storeReaders: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const follow = async (base: string, after: number, until: number): Promise<number> => {
  let cursor = after;
  let delivered = 0;
  // Bounded: every request either advances the cursor or waits at most 5 s; 10,000 requests cap it.
  for (let i = 0; i < 10_000 && cursor < until; i++) {
    const res = await fetch(`${base}&after=${cursor}`);
    const body = (await res.json()) as { records?: unknown[]; next_cursor: number };
    if (!body.records) throw new Error(`poll answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
    delivered += body.records.length;
    cursor = body.next_cursor;
  }
  return delivered;
};

const runOnce = async (redisUrl: string | undefined, pollers: number, frames: number) => {
  const capsule = `hubbench-${Math.random().toString(36).slice(2, 8)}`;
  // Nothing listens at that URL: the ingestor backs off; frames are appended at the writer.
  const gw = await startTestGateway({
    capsules: { [capsule]: 'http://127.0.0.1:9/' },
    ...(redisUrl ? { redisUrl } : {}),
  });
  try {
    const start = (await gw.core.position(capsule)).head;
    const until = start + frames;
    const base = `${gw.baseUrl}/murmur/${capsule}/poll?wait=5&limit=1000`;
    const t0 = performance.now();
    const clients = Array.from({ length: pollers }, () => follow(base, start, until));
    let readers = 0;
    for (let i = 0; i < frames; i++) {
      void gw.gateway.writer.append(capsule, {
        kind: 'frame',
        event: 'text',
        upstreamId: String(i),
        data: `{"id":"tsk_bench","text":"chunk ${i}","final":false}`,
        receivedAt: Date.now(),
      });
      // Pace the producer in slices so pollers park and wake many times (a stream, not one batch).
      if (i % 500 === 499) {
        await new Promise((r) => setTimeout(r, 1));
        readers = Math.max(readers, gw.gateway.hub.stats().tailLoops);
      }
    }
    const delivered = (await Promise.all(clients)).reduce((a, b) => a + b, 0);
    const seconds = (performance.now() - t0) / 1000;
    return { deliveredPerSec: delivered / seconds, readers };
  } finally {
    await gw.close();
  }
};

export const benchHubFanout = async (opts: { redisUrl?: string; runs: number }): Promise<HubFanoutRow[]> => {
  const rows: HubFanoutRow[] = [];
  const stores: [string, string | undefined][] = [['memory', undefined]];
  if (opts.redisUrl) stores.push(['redis', opts.redisUrl]);
  for (const [store, url] of stores) {
    for (const pollers of [10, 100, 500]) {
      const frames = 10_000;
      const results = [];
      for (let r = 0; r < opts.runs; r++) results.push(await runOnce(url, pollers, frames));
      rows.push({
        store,
        pollers,
        frames,
        deliveredPerSec: Math.round(median(results.map((x) => x.deliveredPerSec))),
        storeReaders: Math.max(...results.map((x) => x.readers)),
      });
    }
  }
  return rows;
};

export const runBench = async (opts: { redisUrl?: string; runs: number }): Promise<void> => {
  console.log(`\n# hub fan-out to long-pollers (GET …/poll), median of ${opts.runs} runs`);
  console.table(await benchHubFanout(opts));
};
