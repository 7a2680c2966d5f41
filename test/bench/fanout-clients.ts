/**
 * Child process of the fan-out benches (fanout.ts, fanout-surfaces.ts, overload.ts), pinned to the
 * client core: opens N SSE subscribers (plain HTTP, EventSource's wire behaviour without its parser
 * cost), and for every event whose seq falls in the measured window counts it and records
 * publish → receipt latency. Subscribers may each read their own URL (one conversation's stream).
 * A seq counts once per connection, the first time it is seen: BeeOS envelopes carry the reply's
 * cumulative body, so one envelope repeats every earlier chunk's marker, and only its newest is the
 * chunk it delivers. Driven over IPC: start → ready, report, stop.
 */
import http from 'node:http';
import { BUCKETS, bucketOf, nowMs } from './fanout-event.js';

interface Start {
  /** One URL for every subscriber, or `urls[i]` for subscriber i. */
  url?: string;
  urls?: string[];
  subs: number;
  /** The measured window, in publish seqs (inclusive). */
  from: number;
  to: number;
}

let window = { from: 1, to: 0 };
let delivered = 0;
/** Every marker seen, in the window or not (a sanity check when nothing is delivered). */
let seen = 0;
let ended = 0;
const hist = new Array<number>(BUCKETS).fill(0);
const reqs: http.ClientRequest[] = [];

/** Scan complete events (up to the last blank line) for `@seq@t@` markers; returns the highest seq. */
const scan = (text: string, t: number, max: number): number => {
  let pos = 0;
  for (;;) {
    const a = text.indexOf('@', pos);
    if (a < 0) return max;
    const b = text.indexOf('@', a + 1);
    const c = b < 0 ? -1 : text.indexOf('@', b + 1);
    if (c < 0) return max;
    pos = c + 1;
    const seq = Number(text.slice(a + 1, b));
    if (!(seq > max)) continue;
    max = seq;
    seen++;
    if (seq >= window.from && seq <= window.to) {
      delivered++;
      hist[bucketOf(t - Number(text.slice(b + 1, c)))]!++;
    }
  }
};

const open = (url: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false, headers: { accept: 'text/event-stream' } });
    reqs.push(req);
    const timer = setTimeout(() => reject(new Error(`no response from ${url} within 20 s`)), 20_000);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      clearTimeout(timer);
      if (res.statusCode !== 200) return reject(new Error(`${url}: HTTP ${res.statusCode}`));
      resolve();
      res.setEncoding('latin1');
      let carry = '';
      let max = 0;
      res.on('data', (chunk: string) => {
        const t = nowMs();
        const buf = carry + chunk;
        const end = buf.lastIndexOf('\n\n');
        if (end < 0) {
          carry = buf;
          return;
        }
        max = scan(end + 2 === buf.length && carry === '' ? buf : buf.slice(0, end + 2), t, max);
        carry = buf.slice(end + 2);
      });
      res.on('end', () => ended++);
      res.on('error', () => undefined);
    });
    req.end();
  });

process.on('message', (msg: { type: string } & Partial<Start>) => {
  if (msg.type === 'start') {
    const { url, urls, subs, from, to } = msg as Start;
    window = { from, to };
    const at = (i: number): string => urls?.[i % urls.length] ?? url!;
    void (async () => {
      // Batches of 50 so the server's accept queue is not flooded.
      for (let i = 0; i < subs; i += 50) {
        await Promise.all(Array.from({ length: Math.min(50, subs - i) }, (_, k) => open(at(i + k))));
      }
      process.send?.({ type: 'ready' });
    })().catch((err: unknown) => process.send?.({ type: 'error', error: String(err) }));
  } else if (msg.type === 'report') {
    process.send?.({ type: 'report', delivered, hist, ended, seen });
  } else if (msg.type === 'stop') {
    for (const r of reqs) r.destroy();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
