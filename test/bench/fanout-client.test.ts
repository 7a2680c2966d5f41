/**
 * The fan-out benches count what fanout-client.c reports: every figure per delivered event divides
 * by it, and its p99 comes from its histogram. Against one loopback server, it must report what the
 * Node clients (fanout-clients.ts) report for the same streams: chunked and close-delimited bodies
 * cut at odd places, BeeOS-style envelopes that repeat every earlier marker, events outside the
 * measured window, responses that end, and a start that fails. Keyed (the follow bench): one
 * connection carrying several streams in `GET /v1/follow`'s framing, each seq counted once per
 * stream, a redelivered one counted as repeated.
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { BUCKETS, nowMs, percentile } from './fanout-event.js';
import { buildBenchBinary } from './bench-binaries.js';
import { startFanoutClient, startLine } from './fanout-client-proc.js';
import { ask, forkPinned, stopProcess } from './fanout-procs.js';

interface Report {
  delivered: number;
  seen: number;
  ended: number;
  repeated: number;
  bytes: number;
  hist: number[];
}

const SEQS = 12;
const WINDOW = { from: 3, to: 9 };
const children: ChildProcess[] = [];
const servers: http.Server[] = [];

afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => stopProcess(c, 1000)));
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/**
 * Each stream: SEQS events, written in pieces of 1-97 bytes; `?beeos` repeats every earlier marker
 * in each event (as a cumulative body does); `?chunked=0` is close-delimited; every response ends
 * once `release` resolves. `?keyed`: `/v1/follow`'s framing, seq N on stream `murmur:s{N % 3}`, the
 * streams written one after another (s2's seqs, then s1's, then s0's: in order per stream, not
 * across them), and with `&repeat` seq 5 written a second time at the end.
 */
const serve = async (release: Promise<void>): Promise<string> => {
  const server = http.createServer((req, res) => {
    const q = new URL(req.url!, 'http://x').searchParams;
    if (q.has('missing')) {
      res.writeHead(404).end();
      return;
    }
    if (q.get('chunked') === '0') res.useChunkedEncodingByDefault = false;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.socket?.setNoDelay(true);
    let text = '';
    const markers: string[] = [];
    for (let seq = 1; seq <= SEQS; seq++) {
      markers.push(`@${seq}@${nowMs().toFixed(3)}@${'.'.repeat(seq * 7)}`);
      const body = q.has('beeos') ? markers.join('') : markers[seq - 1];
      if (!q.has('keyed')) text += `id: ${seq}\nevent: message\ndata: {"text":"${body}"}\n\n: comment\n\n`;
    }
    if (q.has('keyed')) {
      const event = (seq: number): string => {
        const record = { offset: seq, kind: 'frame', data: JSON.stringify({ text: markers[seq - 1] }) };
        const data = { stream: `murmur:s${seq % 3}`, cursor: String(seq), event: 'record', data: record };
        return `id: v1.${Buffer.from(String(seq)).toString('base64url')}\ndata: ${JSON.stringify(data)}\n\n:\n\n`;
      };
      for (const stream of [2, 1, 0])
        for (let seq = 1; seq <= SEQS; seq++) if (seq % 3 === stream) text += event(seq);
      if (q.has('repeat')) text += event(5);
    }
    const pieces: string[] = [];
    for (let i = 0, k = 0; i < text.length; k++) {
      const n = 1 + ((k * 37) % 97);
      pieces.push(text.slice(i, i + n));
      i += n;
    }
    const next = (): void => {
      const piece = pieces.shift();
      if (piece !== undefined) res.write(piece, () => setImmediate(next));
      else void release.then(() => res.end());
    };
    next();
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

const urlsOf = (base: string): string[] =>
  ['?chunked=1', '?chunked=0', '?beeos&chunked=1', '?beeos&chunked=0'].map((q) => `${base}/events${q}`);

/** Reports until every stream has all its markers and has ended (bounded: the streams are finite). */
const settled = async (child: ChildProcess, subs: number): Promise<Report> => {
  for (let i = 0; i < 200; i++) {
    const r = await ask<Report>(child, { type: 'report' }, 'report');
    if (r.seen === subs * SEQS && r.ended === subs) return r;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return ask<Report>(child, { type: 'report' }, 'report');
};

const counts = (r: Report): Pick<Report, 'delivered' | 'seen' | 'ended'> => ({
  delivered: r.delivered,
  seen: r.seen,
  ended: r.ended,
});

const run = async (child: ChildProcess, urls: string[], subs: number, keyed = false): Promise<Report> => {
  children.push(child);
  await ask(child, { type: 'start', urls, subs, keyed, ...WINDOW }, 'ready', 20_000);
  return settled(child, subs);
};

const NODE_CLIENTS = fileURLToPath(new URL('./fanout-clients.ts', import.meta.url));

describe('fanout-client.c', () => {
  it('builds with the machine C compiler', () => {
    expect(buildBenchBinary('fanout-client')).toMatch(/fanout-client/);
  });

  it('passes the window and one URL per subscriber on its start line', () => {
    expect(startLine({ type: 'start', urls: ['http://a/1', 'http://a/2'], subs: 3, from: 5, to: 9 })).toBe(
      'start 5 9 http://a/1 http://a/2 http://a/1\n',
    );
    expect(startLine({ type: 'start', url: 'http://a/x', subs: 2, from: 1, to: 4 })).toBe(
      'start 1 4 http://a/x http://a/x\n',
    );
    expect(startLine({ type: 'start', url: 'http://a/x', subs: 1, from: 1, to: 4, keyed: true })).toBe(
      'start-keyed 1 4 http://a/x\n',
    );
  });

  it('reports what the Node clients report for the same streams, marker by marker', async () => {
    let release!: () => void;
    const base = await serve(new Promise<void>((r) => (release = r)));
    const urls = urlsOf(base);
    const subs = 20;
    const c = startFanoutClient(0);
    const node = forkPinned(0, fileURLToPath(new URL('./fanout-clients.ts', import.meta.url)));
    const [fromC, fromNode] = await Promise.all([
      (async () => {
        children.push(c);
        await ask(c, { type: 'start', urls, subs, ...WINDOW }, 'ready', 20_000);
      })(),
      (async () => {
        children.push(node);
        await ask(node, { type: 'start', urls, subs, ...WINDOW }, 'ready', 20_000);
      })(),
    ]).then(async () => {
      release();
      return Promise.all([settled(c, subs), settled(node, subs)]);
    });
    const perWindow = WINDOW.to - WINDOW.from + 1;
    expect(counts(fromC)).toEqual({ delivered: subs * perWindow, seen: subs * SEQS, ended: subs });
    expect(counts(fromC)).toEqual(counts(fromNode));
    expect(fromC.hist).toHaveLength(BUCKETS);
    expect(fromC.hist.reduce((a, b) => a + b, 0)).toBe(subs * perWindow);
    // Latencies: publish time to receipt on loopback, well under the 20 s the streams could take.
    expect(percentile(fromC.hist, 50)).toBeGreaterThan(0);
    expect(percentile(fromC.hist, 100)).toBeLessThan(20_000);
  });

  it('counts nothing outside the window and each seq once per connection', async () => {
    const base = await serve(Promise.resolve());
    const report = await run(startFanoutClient(0), [`${base}/events?beeos&chunked=1`], 3);
    expect(counts(report)).toEqual({
      delivered: 3 * (WINDOW.to - WINDOW.from + 1),
      seen: 3 * SEQS,
      ended: 3,
    });
  });

  it('fails its start with the status of a subscriber that is refused, as the Node clients do', async () => {
    const base = await serve(Promise.resolve());
    const url = `${base}/events?missing`;
    const c = startFanoutClient(0);
    children.push(c);
    await expect(ask(c, { type: 'start', urls: [url], subs: 2, ...WINDOW }, 'ready', 20_000)).rejects.toThrow(
      `${url}: HTTP 404`,
    );
  });

  it('counts each stream of a keyed connection on its own, as the Node clients do', async () => {
    const base = await serve(Promise.resolve());
    const urls = ['?keyed&chunked=1', '?keyed&chunked=0', '?keyed&repeat&chunked=1'].map(
      (q) => `${base}/v1/follow${q}`,
    );
    const subs = 6;
    const [fromC, fromNode] = await Promise.all([
      run(startFanoutClient(0), urls, subs, true),
      run(forkPinned(0, NODE_CLIENTS), urls, subs, true),
    ]);
    const perWindow = WINDOW.to - WINDOW.from + 1;
    // Every seq of every stream once, though the streams' seqs interleave out of order on the wire;
    // the seq written twice (two of the six connections) is repeated, not delivered again.
    expect(counts(fromC)).toEqual({ delivered: subs * perWindow, seen: subs * SEQS, ended: subs });
    expect(fromC.repeated).toBe(2);
    expect({ ...counts(fromNode), repeated: fromNode.repeated, bytes: fromNode.bytes }).toEqual({
      ...counts(fromC),
      repeated: fromC.repeated,
      bytes: fromC.bytes,
    });
    expect(fromC.bytes).toBeGreaterThan(subs * SEQS * 100);
  });

  it('counts a keyed stream as one stream when not told it is keyed (so the key is what counts)', async () => {
    const base = await serve(Promise.resolve());
    const report = await run(startFanoutClient(0), [`${base}/v1/follow?keyed&chunked=1`], 1);
    // s2's seqs (2, 5, 8, 11) first: only 12 of s1's and s0's later ones is above them.
    expect(report.seen).toBe(5);
    expect(report.repeated).toBe(0);
  });
});
