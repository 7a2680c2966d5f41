/**
 * An HTTP client that runs inside a test network namespace (netns.ts) and is driven from the test
 * process over stdin/stdout, one JSON object per line: the test cannot open sockets into a namespace
 * itself. Commands: `fetch` (one request, its status, Retry-After and body) and `sse` (a stream: its
 * status, then each event's id and type, then how it ended); `close` ends a stream from this side.
 */
import http from 'node:http';
import { createInterface } from 'node:readline';

type Command =
  | { id: string; op: 'fetch'; url: string; method?: string; body?: string; timeoutMs?: number }
  | { id: string; op: 'sse'; url: string; headers?: Record<string, string> }
  | { id: string; op: 'close'; target: string };

const say = (message: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ at: Date.now(), ...message })}\n`);
};

const streams = new Map<string, http.ClientRequest>();

const doFetch = (c: Extract<Command, { op: 'fetch' }>): void => {
  const req = http.request(c.url, {
    method: c.method ?? 'GET',
    headers: c.body ? { 'content-type': 'application/json' } : {},
    timeout: c.timeoutMs ?? 10_000,
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (err) => say({ id: c.id, ev: 'error', message: err.message }));
  req.on('response', (res) => {
    const chunks: Buffer[] = [];
    res.on('data', (b: Buffer) => chunks.push(b));
    res.on('error', (err) => say({ id: c.id, ev: 'error', message: err.message }));
    res.on('end', () =>
      say({
        id: c.id,
        ev: 'response',
        status: res.statusCode,
        retryAfter: res.headers['retry-after'] ?? null,
        body: Buffer.concat(chunks).toString('utf8'),
      }),
    );
  });
  req.end(c.body);
};

const doSse = (c: Extract<Command, { op: 'sse' }>): void => {
  const req = http.request(c.url, { headers: { accept: 'text/event-stream', ...c.headers } });
  streams.set(c.id, req);
  let ended = false;
  const end = (reason: string): void => {
    if (ended) return;
    ended = true;
    streams.delete(c.id);
    say({ id: c.id, ev: 'end', reason });
  };
  req.on('error', (err) => end(`error: ${err.message}`));
  req.on('response', (res) => {
    say({ id: c.id, ev: 'open', status: res.statusCode });
    let buffered = '';
    res.setEncoding('utf8');
    res.on('data', (text: string) => {
      buffered += text;
      let cut: number;
      while ((cut = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 2);
        let eventId: string | null = null;
        let event = 'message';
        let comment = false;
        for (const line of block.split('\n')) {
          if (line.startsWith('id:')) eventId = line.slice(3).trim();
          else if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith(':')) comment = true;
        }
        if (eventId !== null || !comment) say({ id: c.id, ev: 'event', eventId, event });
        else say({ id: c.id, ev: 'comment' });
      }
    });
    res.on('end', () => end('ended'));
    res.on('close', () => end('closed'));
  });
  req.end();
};

createInterface({ input: process.stdin }).on('line', (line) => {
  const c = JSON.parse(line) as Command;
  if (c.op === 'fetch') doFetch(c);
  else if (c.op === 'sse') doSse(c);
  else {
    streams.get(c.target)?.destroy();
    streams.delete(c.target);
  }
});
say({ ev: 'ready' });
