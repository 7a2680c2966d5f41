/**
 * Child process of the fan-out benches (fanout.ts, fanout-surfaces.ts, overload.ts), pinned to the
 * client core: opens N SSE subscribers (EventSource's wire behaviour without its cost: a raw socket,
 * sse-raw-reader.ts), and for every event whose seq falls in the measured window counts it and records
 * publish → receipt latency. Subscribers may each read their own URL (one conversation's stream).
 * A seq counts once per connection, the first time it is seen: BeeOS envelopes carry the reply's
 * cumulative body, so one envelope repeats every earlier chunk's marker, and only its newest is the
 * chunk it delivers. Driven over IPC: start → ready, report, stop.
 */
import type { Socket } from 'node:net';
import { BUCKETS, bucketOf, nowMs } from './fanout-event.js';
import { openRawSse } from './sse-raw-reader.js';

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
const sockets: Socket[] = [];

/** A decimal number (digits and at most one `.`) in `buf[from, to)`, NaN when there is none. */
const numberAt = (buf: Buffer, from: number, to: number): number => {
  let n = 0;
  let scale = 0;
  for (let i = from; i < to; i++) {
    const c = buf[i]!;
    if (c === 46 && scale === 0) scale = 1;
    else if (c >= 48 && c <= 57) {
      n = n * 10 + (c - 48);
      if (scale > 0) scale *= 10;
    } else return NaN;
  }
  return to > from ? (scale > 0 ? n / scale : n) : NaN;
};

const AT = 64; // '@'

/** Scan complete events `buf[0, end)` for `@seq@t@` markers; returns the highest seq seen. */
const scan = (buf: Buffer, end: number, t: number, max: number): number => {
  let pos = 0;
  for (;;) {
    const a = buf.indexOf(AT, pos);
    if (a < 0 || a >= end) return max;
    const b = buf.indexOf(AT, a + 1);
    const c = b < 0 || b >= end ? -1 : buf.indexOf(AT, b + 1);
    if (c < 0 || c >= end) return max;
    pos = c + 1;
    const seq = numberAt(buf, a + 1, b);
    if (!(seq > max)) continue;
    max = seq;
    seen++;
    if (seq >= window.from && seq <= window.to) {
      delivered++;
      hist[bucketOf(t - numberAt(buf, b + 1, c))]!++;
    }
  }
};

const open = (url: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no response from ${url} within 20 s`)), 20_000);
    let max = 0;
    const socket = openRawSse(url, {
      onStatus: (status) => {
        clearTimeout(timer);
        if (status !== 200) reject(new Error(`${url}: HTTP ${status}`));
        else resolve();
      },
      onEvents: (bytes, end) => (max = scan(bytes, end, nowMs(), max)),
      onEnd: () => ended++,
      onError: (err) => {
        clearTimeout(timer);
        reject(err);
      },
    });
    sockets.push(socket);
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
    for (const s of sockets) s.destroy();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
