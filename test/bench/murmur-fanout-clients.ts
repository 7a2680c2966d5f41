/**
 * Child process of the Murmur fan-out bench: opens N SSE watchers (so their CPU is not the
 * gateway's), counts delivered frames and measures write → receipt latency on a sample of them.
 * Driven over IPC by murmur-fanout.ts.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

interface Start {
  url: string;
  watchers: number;
  sampled: number;
}

const now = (): number => performance.timeOrigin + performance.now();
const T = /"t":(\d+(?:\.\d+)?)/g;

let frames = 0;
const latencies: number[] = [];
const reqs: http.ClientRequest[] = [];

const open = (url: string, sample: boolean): Promise<void> =>
  new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false });
    reqs.push(req);
    req.on('error', reject);
    req.on('response', (res) => {
      res.setEncoding('latin1');
      let first = true;
      res.on('data', (chunk: string) => {
        if (first) {
          first = false;
          resolve();
        }
        // Count frames by their data lines carrying a write time.
        let count = 0;
        T.lastIndex = 0;
        let m: RegExpExecArray | null;
        const t = sample ? now() : 0;
        while ((m = T.exec(chunk)) !== null) {
          count++;
          if (sample) latencies.push(t - Number(m[1]));
        }
        frames += count;
      });
      res.on('error', () => undefined);
    });
    req.end();
  });

process.on('message', (msg: { type: string } & Partial<Start>) => {
  if (msg.type === 'start') {
    const { url, watchers, sampled } = msg as Start;
    void (async () => {
      for (let i = 0; i < watchers; i += 100) {
        await Promise.all(
          Array.from({ length: Math.min(100, watchers - i) }, (_, j) => open(url, i + j < sampled)),
        );
      }
      process.send?.({ type: 'ready' });
    })().catch((err: unknown) => process.send?.({ type: 'error', error: String(err) }));
  } else if (msg.type === 'reset') {
    frames = 0;
    latencies.length = 0;
    process.send?.({ type: 'reset' });
  } else if (msg.type === 'report') {
    process.send?.({ type: 'report', frames, latencies });
  } else if (msg.type === 'stop') {
    for (const r of reqs) r.destroy();
    process.exit(0);
  }
});
