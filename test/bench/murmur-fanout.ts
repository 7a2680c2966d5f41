/**
 * Murmur fan-out bench (issue 3): N watchers on one capsule, R frames/s appended to its log →
 * delivered frames/s, p50/p99 write → receipt latency, gateway CPU per delivered frame and RSS,
 * embedded and Redis stores, beside a naive Node fan-out (every frame written to every socket
 * separately) in the same run. Watchers run in a child process so their CPU is not counted.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startMurmurGateway } from '../adapters/murmur/harness.js';

export interface FanoutRow {
  target: 'memory' | 'redis' | 'naive';
  watchers: number;
  ratePerSec: number;
  deliveredPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerDelivered: number;
  rssMb: number;
}

export interface FanoutOptions {
  redisUrl?: string;
  watchers?: number[];
  rates?: number[];
  /** Measured window per configuration (ms). */
  durationMs?: number;
}

const CHILD = fileURLToPath(new URL('./murmur-fanout-clients.ts', import.meta.url));
const SAMPLED = 10;
const nowMs = (): number => performance.timeOrigin + performance.now();

interface Target {
  url: string;
  /** Emit one frame (the bench's capsule write). */
  emit(seq: number): void;
  close(): Promise<void>;
}

const frameData = (seq: number): string =>
  `{"id":"tsk_bench","text":"chunk ${seq} of a streamed reply, about sixty bytes","final":false,"t":${nowMs().toFixed(3)}}`;

const gatewayTarget = async (redisUrl?: string): Promise<Target> => {
  const capsule = `bench-${Math.random().toString(36).slice(2, 8)}`;
  // No capsule listens there: the ingestor backs off; frames are appended at the log writer.
  const gw = await startMurmurGateway({
    capsules: { [capsule]: 'http://127.0.0.1:9/' },
    ...(redisUrl ? { redisUrl } : {}),
    config: { maxQueuedRecords: 100_000 },
  });
  const head = (await gw.core.position(capsule)).head;
  return {
    url: `${gw.baseUrl}/murmur/${capsule}/events?last_event_id=${head}`,
    emit: (seq) =>
      void gw.writer.append(capsule, {
        kind: 'frame',
        event: 'text',
        upstreamId: String(seq),
        data: frameData(seq),
        receivedAt: Date.now(),
      }),
    close: () => gw.close(),
  };
};

/** The naive fan-out: one res.write per frame per socket. */
const naiveTarget = async (): Promise<Target> => {
  const clients = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(':ok\n\n');
    clients.add(res);
    req.on('close', () => clients.delete(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    emit: (seq) => {
      const bytes = `id: ${seq}\nevent: text\ndata: ${frameData(seq)}\n\n`;
      for (const res of clients) res.write(bytes);
    },
    close: () =>
      new Promise<void>((r) => {
        for (const res of clients) res.destroy();
        server.close(() => r());
      }),
  };
};

const ask = <T>(child: ChildProcess, msg: object, reply: string): Promise<T> =>
  new Promise((resolve, reject) => {
    const on = (m: { type: string; error?: string }): void => {
      if (m.type === 'error') reject(new Error(m.error));
      if (m.type !== reply) return;
      child.off('message', on);
      resolve(m as T);
    };
    child.on('message', on);
    child.send(msg);
  });

const pct = (sorted: number[], p: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

const runOne = async (
  target: Target,
  kind: FanoutRow['target'],
  watchers: number,
  rate: number,
  durationMs: number,
): Promise<FanoutRow> => {
  const child = fork(CHILD, [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  try {
    await ask(child, { type: 'start', url: target.url, watchers, sampled: SAMPLED }, 'ready');
    await ask(child, { type: 'reset' }, 'reset');
    const cpu0 = process.cpuUsage();
    let rss = process.memoryUsage().rss;
    const t0 = performance.now();
    let seq = 0;
    // Emit on a 1 ms pacing timer, catching up to the schedule (a load generator, not a correctness wait).
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.floor(((performance.now() - t0) * rate) / 1000);
        while (seq < due) target.emit(++seq);
        rss = Math.max(rss, process.memoryUsage.rss());
        if (performance.now() - t0 >= durationMs) {
          clearInterval(timer);
          resolve();
        }
      }, 1);
    });
    await new Promise((r) => setTimeout(r, 300)); // let the last frames arrive
    const cpu = process.cpuUsage(cpu0);
    const elapsed = performance.now() - t0;
    const report = await ask<{ frames: number; latencies: number[] }>(child, { type: 'report' }, 'report');
    const sorted = report.latencies.sort((a, b) => a - b);
    return {
      target: kind,
      watchers,
      ratePerSec: rate,
      deliveredPerSec: Math.round((report.frames * 1000) / elapsed),
      p50Ms: Number(pct(sorted, 50).toFixed(2)),
      p99Ms: Number(pct(sorted, 99).toFixed(2)),
      cpuUsPerDelivered: Number(((cpu.user + cpu.system) / Math.max(1, report.frames)).toFixed(2)),
      rssMb: Math.round(rss / 1e6),
    };
  } finally {
    child.send({ type: 'stop' });
  }
};

/** Every configuration, each bounded to `durationMs`; rows in the order measured. */
export const benchMurmurFanout = async (options: FanoutOptions = {}): Promise<FanoutRow[]> => {
  const rows: FanoutRow[] = [];
  const durationMs = options.durationMs ?? 2000;
  for (const watchers of options.watchers ?? [100, 1000]) {
    for (const rate of options.rates ?? [100, 1000]) {
      const kinds: FanoutRow['target'][] = [
        'naive',
        'memory',
        ...(options.redisUrl ? ['redis' as const] : []),
      ];
      for (const kind of kinds) {
        const target =
          kind === 'naive'
            ? await naiveTarget()
            : await gatewayTarget(kind === 'redis' ? options.redisUrl : undefined);
        try {
          rows.push(await runOne(target, kind, watchers, rate, durationMs));
        } finally {
          await target.close();
        }
      }
    }
  }
  return rows;
};

/** The entry `npm run bench` (test/bench/run.ts) calls. */
export const runBench = async (o: { redisUrl?: string; runs: number }): Promise<void> => {
  console.log('\n# murmur fan-out (N watchers × R frames/s on one capsule; CPU per delivered frame)');
  console.table(await benchMurmurFanout(o.redisUrl ? { redisUrl: o.redisUrl } : {}));
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runBench({ ...(process.env.REDIS_URL ? { redisUrl: process.env.REDIS_URL } : {}), runs: 1 }).then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
