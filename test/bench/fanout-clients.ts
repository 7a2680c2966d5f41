/**
 * Child process of the fan-out benches (fanout.ts, fanout-surfaces.ts, overload.ts), pinned to the
 * client core: opens N SSE subscribers (EventSource's wire behaviour without its cost: a raw socket,
 * sse-raw-reader.ts), and for every event whose seq falls in the measured window counts it and records
 * publish → receipt latency. Subscribers may each read their own URL (one conversation's stream).
 * A seq counts once per connection, the first time it is seen: BeeOS envelopes carry the reply's
 * cumulative body, so one envelope repeats every earlier chunk's marker, and only its newest is the
 * chunk it delivers. Driven over IPC: start → ready, report, stop.
 *
 * `keyed` (the follow bench): a connection carries several streams, each event's data line opening
 * with `data: {"stream":"KEY"`; a seq then counts once per stream of a connection, and one at or
 * below its stream's highest is `repeated` (fanout-client.c says the same).
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
  /** Several streams per connection, each data line naming its stream (see the header). */
  keyed?: boolean;
}

let window = { from: 1, to: 0 };
let delivered = 0;
/** Every marker seen, in the window or not (a sanity check when nothing is delivered). */
let seen = 0;
let ended = 0;
/** Keyed: seqs at or below their stream's highest on that connection. */
let repeated = 0;
/** Body bytes handed over in complete events. */
let bytes = 0;
let keyed = false;
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

/**
 * Scan `buf[from, end)` for `@seq@t@` markers; `max` holds the highest seq seen on the stream (per
 * connection, or per stream of a connection when keyed) and is moved on.
 */
const scanRange = (buf: Buffer, from: number, end: number, t: number, max: { seq: number }): void => {
  let pos = from;
  for (;;) {
    const a = buf.indexOf(AT, pos);
    if (a < 0 || a >= end) return;
    const b = buf.indexOf(AT, a + 1);
    const c = b < 0 || b >= end ? -1 : buf.indexOf(AT, b + 1);
    if (c < 0 || c >= end) return;
    pos = c + 1;
    const seq = numberAt(buf, a + 1, b);
    if (keyed && seq <= max.seq) repeated++;
    if (!(seq > max.seq)) continue;
    max.seq = seq;
    seen++;
    if (seq >= window.from && seq <= window.to) {
      delivered++;
      hist[bucketOf(t - numberAt(buf, b + 1, c))]!++;
    }
  }
};

const KEY_PREFIX = Buffer.from('data: {"stream":"');
const LF = 10;
const QUOTE = 34;

/** Keyed: line by line, a key line's markers counted against its stream's highest seq. */
const scanKeyed = (buf: Buffer, end: number, t: number, maxes: Map<string, { seq: number }>): void => {
  for (let line = 0; line < end;) {
    const nl = buf.indexOf(LF, line);
    const lineEnd = nl < 0 || nl >= end ? end : nl;
    let key = '';
    let from = line;
    if (
      lineEnd - line > KEY_PREFIX.length &&
      buf.compare(KEY_PREFIX, 0, KEY_PREFIX.length, line, line + KEY_PREFIX.length) === 0
    ) {
      const q = buf.indexOf(QUOTE, line + KEY_PREFIX.length);
      if (q >= 0 && q < lineEnd) {
        key = buf.toString('latin1', line + KEY_PREFIX.length, q);
        from = q + 1;
      }
    }
    let max = maxes.get(key);
    if (!max) maxes.set(key, (max = { seq: 0 }));
    scanRange(buf, from, lineEnd, t, max);
    line = lineEnd + 1;
  }
};

const open = (url: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no response from ${url} within 20 s`)), 20_000);
    const max = { seq: 0 };
    const maxes = new Map<string, { seq: number }>();
    const socket = openRawSse(url, {
      onStatus: (status) => {
        clearTimeout(timer);
        if (status !== 200) reject(new Error(`${url}: HTTP ${status}`));
        else resolve();
      },
      onEvents: (buf, end) => {
        bytes += end;
        if (keyed) scanKeyed(buf, end, nowMs(), maxes);
        else scanRange(buf, 0, end, nowMs(), max);
      },
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
    keyed = msg.keyed === true;
    const at = (i: number): string => urls?.[i % urls.length] ?? url!;
    void (async () => {
      // Batches of 50 so the server's accept queue is not flooded.
      for (let i = 0; i < subs; i += 50) {
        await Promise.all(Array.from({ length: Math.min(50, subs - i) }, (_, k) => open(at(i + k))));
      }
      process.send?.({ type: 'ready' });
    })().catch((err: unknown) => process.send?.({ type: 'error', error: String(err) }));
  } else if (msg.type === 'report') {
    process.send?.({ type: 'report', delivered, hist, ended, seen, repeated, bytes });
  } else if (msg.type === 'stop') {
    for (const s of sockets) s.destroy();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
