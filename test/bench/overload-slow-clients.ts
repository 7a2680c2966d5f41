/**
 * Child process of the overload bench (overload.ts), pinned to the client core: N native SSE
 * subscribers that stop reading. Each connection reads about `readBytes`, then reads nothing for
 * `stallMs` (a frozen tab, a stopped process), then reads until it has caught up (an event published
 * under half a second ago) or the stream ends, and so on. A reader that is not reading cannot see
 * that the gateway ended it (a paused socket is not polled, so neither the FIN nor the reset is
 * noticed): only the read after the stall finds the end, reads the last complete events, and
 * reopens with `Last-Event-ID` set to the last one's id, as EventSource does. Every subscriber
 * checks that the chunks it received across its connections are exactly the published sequence
 * from its first one: no seq missing, none twice.
 *
 * Why stop, not slow down: a reader capped at 20 KB/s of this ~260 KB/s stream was never ended in a
 * 43 s window, as the kernel grows its buffers with what the reader consumes (about 10 MB per
 * connection here) before the gateway's bound starts to count. A reader that reads nothing leaves
 * them small (about 4.3 MB, mostly our send buffer): with the 1 MiB bound, about 22 s of this
 * stream. Driven over IPC: start → ready, report, stop.
 */
import http from 'node:http';
import { nowMs } from './fanout-event.js';

/** A draining reader whose newest event is younger than this has caught up: it may stop again. */
const CAUGHT_UP_MS = 500;

interface Start {
  url: string;
  subs: number;
  readBytes: number;
  stallMs: number;
}

type Cycle = Pick<Start, 'readBytes' | 'stallMs'>;

interface Sub {
  lastId: string | null;
  lastSeq: number;
  /** Publish time of the newest event read (ms). */
  lastAt: number;
  missing: number;
  dups: number;
  /** Connections the server ended (clean end, reset or error after the response). */
  ends: number;
  gapFrames: number;
  events: number;
  req: http.ClientRequest | null;
}

const subs: Sub[] = [];
let stopping = false;

/** One complete event's lines: its `id:`, whether it is a `gap`, and its `@seq@` marker. */
const onEvent = (sub: Sub, block: string): void => {
  const id = /^id: (\d+)$/m.exec(block);
  if (id) sub.lastId = id[1]!;
  // The first connection's cold-attach gap is where it starts, not a loss.
  if (sub.lastSeq > 0 && block.includes('event: gap')) sub.gapFrames++;
  const a = block.indexOf('"text":"@');
  if (a < 0) return;
  const b = block.indexOf('@', a + 9);
  const seq = Number(block.slice(a + 9, b));
  sub.lastAt = Number(block.slice(b + 1, block.indexOf('@', b + 1)));
  sub.events++;
  if (sub.lastSeq > 0) {
    if (seq <= sub.lastSeq) sub.dups++;
    else sub.missing += seq - sub.lastSeq - 1;
  }
  if (seq > sub.lastSeq) sub.lastSeq = seq;
};

const connect = (sub: Sub, url: string, cycle: Cycle): Promise<void> =>
  new Promise((resolve, reject) => {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (sub.lastId !== null) headers['last-event-id'] = sub.lastId;
    const req = http.request(url, { agent: false, headers });
    sub.req = req;
    let done = false;
    let answered = false;
    /** Reopen with the cursor; a connection that never answered is retried without counting as ended. */
    const again = (): void => {
      if (done || stopping) return;
      done = true;
      if (answered) sub.ends++;
      setTimeout(() => void connect(sub, url, cycle).catch(() => undefined), answered ? 0 : 100);
    };
    req.on('error', (err) => (sub.ends === 0 && sub.lastId === null && !answered ? reject(err) : again()));
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        if (sub.lastId === null) return reject(new Error(`${url}: HTTP ${res.statusCode}`));
        return again();
      }
      answered = true;
      resolve();
      res.setEncoding('latin1');
      let carry = '';
      // Reading up to readBytes, then stopped for stallMs, then reading until caught up.
      let phase: 'budget' | 'stalled' | 'draining' = 'budget';
      let read = 0;
      res.on('data', (chunk: string) => {
        const buf = carry + chunk;
        const blocks = buf.split('\n\n');
        carry = blocks.pop()!;
        for (const b of blocks) onEvent(sub, b);
        read += chunk.length;
        if (phase === 'draining' && nowMs() - sub.lastAt < CAUGHT_UP_MS) {
          phase = 'budget';
          read = 0;
        } else if (phase === 'budget' && read >= cycle.readBytes) {
          phase = 'stalled';
          res.pause();
          setTimeout(() => {
            if (done) return;
            phase = 'draining';
            res.resume();
          }, cycle.stallMs);
        }
      });
      res.on('end', again);
      res.on('error', again);
      res.on('close', again);
    });
    req.end();
  });

process.on('message', (msg: { type: string } & Partial<Start>) => {
  if (msg.type === 'start') {
    const { url, subs: n, readBytes, stallMs } = msg as Start;
    void (async () => {
      for (let i = 0; i < n; i++) {
        const sub: Sub = {
          lastId: null,
          lastSeq: 0,
          lastAt: 0,
          missing: 0,
          dups: 0,
          ends: 0,
          gapFrames: 0,
          events: 0,
          req: null,
        };
        subs.push(sub);
        await connect(sub, url, { readBytes, stallMs });
      }
      process.send?.({ type: 'ready' });
    })().catch((err: unknown) => process.send?.({ type: 'error', error: String(err) }));
  } else if (msg.type === 'report') {
    process.send?.({
      type: 'report',
      subs: subs.map(({ lastSeq, missing, dups, ends, gapFrames, events }) => ({
        lastSeq,
        missing,
        dups,
        ends,
        gapFrames,
        events,
      })),
    });
  } else if (msg.type === 'stop') {
    stopping = true;
    for (const s of subs) s.req?.destroy();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
