/**
 * Child process of the overload bench (overload.ts), pinned to the client core: N native SSE
 * subscribers that read slowly on purpose (stalled for `stallMs`, then reading for `readMs`, over
 * and over). A connection the gateway ends is reopened at once with `Last-Event-ID` set to the id of
 * the last complete event read, as EventSource does, and every subscriber checks that the chunks it
 * received across its connections are exactly the published sequence from its first one: no seq
 * missing, none twice. Driven over IPC: start → ready, report, stop.
 */
import http from 'node:http';

interface Start {
  url: string;
  subs: number;
  stallMs: number;
  readMs: number;
}

interface Sub {
  lastId: string | null;
  lastSeq: number;
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
  const seq = Number(block.slice(a + 9, block.indexOf('@', a + 9)));
  sub.events++;
  if (sub.lastSeq > 0) {
    if (seq <= sub.lastSeq) sub.dups++;
    else sub.missing += seq - sub.lastSeq - 1;
  }
  if (seq > sub.lastSeq) sub.lastSeq = seq;
};

const connect = (sub: Sub, url: string, cycle: { stallMs: number; readMs: number }): Promise<void> =>
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
      res.on('data', (chunk: string) => {
        const buf = carry + chunk;
        const blocks = buf.split('\n\n');
        carry = blocks.pop()!;
        for (const b of blocks) onEvent(sub, b);
      });
      // Slow on purpose: stalled, then reading for a while, for as long as the connection lasts.
      const stall = (): void => {
        if (done) return;
        res.pause();
        setTimeout(() => {
          if (done) return;
          res.resume();
          setTimeout(stall, cycle.readMs);
        }, cycle.stallMs);
      };
      stall();
      res.on('end', again);
      res.on('error', again);
      res.on('close', again);
    });
    req.end();
  });

process.on('message', (msg: { type: string } & Partial<Start>) => {
  if (msg.type === 'start') {
    const { url, subs: n, stallMs, readMs } = msg as Start;
    void (async () => {
      for (let i = 0; i < n; i++) {
        const sub: Sub = {
          lastId: null,
          lastSeq: 0,
          missing: 0,
          dups: 0,
          ends: 0,
          gapFrames: 0,
          events: 0,
          req: null,
        };
        subs.push(sub);
        await connect(sub, url, { stallMs, readMs });
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
