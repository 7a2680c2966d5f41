/**
 * Time to the first token through the AI SDK surface: from the `POST {gateway}/ai-sdk/{capsule}/chat`
 * to its first `text-delta`, beside the same message sent straight to the capsule (`message/stream`,
 * to its first `text` frame, on a twin capsule with the same options). The gap is the surface's cost: the durable submission record, the
 * queue's hand-off (fenced `submission-handed` fact, then the capsule's `message/stream`), the frame's
 * way through the log and the hub, and the projection. Runs alternate, one message at a time, on an
 * idle simulated capsule (the embedded store, and Redis when redis-server is installed).
 *
 * `npm run bench -- ai-sdk`. Env: BENCH_AI_SDK_RUNS (40).
 */
import { randomUUID } from 'node:crypto';
import { startSimulator } from '../../src/simulator/index.js';
import { startTestGateway } from '../support/gateway.js';
import { redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import { num } from './bench-env.js';
import type { Figure } from './scale-summary.js';

/** ms from `start()` to the first SSE event whose data line contains `needle`; the body is read to its end. */
const firstMatch = async (start: () => Promise<Response>, needle: string): Promise<number> => {
  const t0 = performance.now();
  const res = await start();
  if (!res.ok || !res.body) throw new Error(`status ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let at: number | null = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (at === null) {
      text += decoder.decode(value, { stream: true });
      if (text.includes(needle)) at = performance.now() - t0;
    }
  }
  if (at === null) throw new Error(`no ${needle} in the stream`);
  return at;
};

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

interface Row {
  store: string;
  path: string;
  runs: number;
  'median ms': string;
  'p90 ms': string;
}

const measure = async (store: 'memory' | 'redis', redisUrl: string | undefined, runs: number) => {
  const sim = await startSimulator({ taskAcceptance: 'single' });
  // The direct path gets a twin capsule: a task sent behind the gateway's back on the gateway's own
  // capsule makes its queue learn the capsule's acceptance by a refusal (a retry a second later).
  const twin = await startSimulator({ taskAcceptance: 'single' });
  const gw = await startTestGateway({
    capsules: { bench: sim.url },
    ...(redisUrl ? { redisUrl } : {}),
    tuning: { queue: { orphanGraceMs: 100 } },
  });
  try {
    const direct = () =>
      fetch(twin.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'message/stream',
          params: {
            message: { messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hello' }] },
          },
        }),
      });
    let chat = 0;
    const viaGateway = () =>
      fetch(`${gw.baseUrl}/ai-sdk/bench/chat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          id: `bench-${chat}`,
          messages: [{ id: `u-${chat++}`, role: 'user', parts: [{ type: 'text', text: 'hello' }] }],
          trigger: 'submit-message',
        }),
      });
    // Warm both paths (connections, the queue's fold, JIT) before measuring.
    for (let i = 0; i < 3; i++) {
      await firstMatch(direct, 'event: text');
      await firstMatch(viaGateway, '"type":"text-delta"');
    }
    const d: number[] = [];
    const g: number[] = [];
    for (let i = 0; i < runs; i++) {
      d.push(await firstMatch(direct, 'event: text'));
      g.push(await firstMatch(viaGateway, '"type":"text-delta"'));
    }
    const row = (path: string, xs: number[]): Row => ({
      store,
      path,
      runs,
      'median ms': quantile(xs, 0.5).toFixed(1),
      'p90 ms': quantile(xs, 0.9).toFixed(1),
    });
    return { rows: [row('straight to the capsule', d), row('POST /ai-sdk/…/chat', g)], d, g };
  } finally {
    await gw.close();
    await sim.stop();
    await twin.stop();
  }
};

/** Target: the surface adds at most this much to the median time to the first token. */
const TARGET_MS = 25;

export const benchAiSdk = async (): Promise<Figure[]> => {
  const runs = num('BENCH_AI_SDK_RUNS', 40);
  console.log(
    `\n# AI SDK surface: POST → first text-delta, beside message/stream → first text (${runs} runs each)`,
  );
  const redis = redisServerAvailable() ? await startRedisServer() : null;
  const figures: Figure[] = [];
  const rows: Row[] = [];
  try {
    const stores: ['memory' | 'redis', string | undefined][] = [['memory', undefined]];
    if (redis) stores.push(['redis', redis.url]);
    for (const [store, url] of stores) {
      const r = await measure(store, url, runs);
      rows.push(...r.rows);
      const dm = quantile(r.d, 0.5);
      const gm = quantile(r.g, 0.5);
      figures.push({
        figure: `AI SDK first text-delta, ${store} store (median)`,
        target: `≤ direct + ${TARGET_MS} ms`,
        anchor: `${dm.toFixed(1)} ms direct`,
        measured: `${gm.toFixed(1)} ms (+${(gm - dm).toFixed(1)} ms)`,
        met: gm - dm <= TARGET_MS,
      });
    }
  } finally {
    await redis?.stop('SIGTERM');
  }
  console.table(rows);
  return figures;
};
