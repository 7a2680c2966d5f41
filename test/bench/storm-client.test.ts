/**
 * The resume storm's C clients (storm-client.c through storm-drivers.ts) decide the storm's figure:
 * a connection counted as caught up before its marker arrived, or a failure not counted, is a wrong
 * figure. (Like the Node clients, they look for the marker in the raw bytes: both answers the storm
 * asks for carry their body as is, close-delimited SSE or a Content-Length body.) Against a loopback server that splits the marker at every position, sends it after more
 * than one read's worth of bytes, answers with an error, or hangs up.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { nowMs } from './fanout-event.js';
import { buildBenchBinary } from './bench-binaries.js';
import { stormDriver, type StormAnswer, type StormDriver } from './storm-drivers.js';

const MARKER = 'id: 4242\n';
const servers: http.Server[] = [];
const drivers: StormDriver[] = [];

afterEach(async () => {
  await Promise.all(drivers.splice(0).map((d) => d.stop()));
  for (const s of servers.splice(0)) s.closeAllConnections();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

const serve = async (handler: http.RequestListener): Promise<string> => {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

const storm = async (
  url: string,
  total: number,
  timeoutMs = 10_000,
  headers?: Record<string, string>,
): Promise<StormAnswer> => {
  const driver = await stormDriver(0, 2, total);
  drivers.push(driver);
  expect(driver.kind).toContain('storm-client.c');
  await driver.prepare({ url, headers }, MARKER, timeoutMs);
  const answers = await driver.go();
  const errors = new Map<string, number>();
  for (const a of answers) for (const [k, n] of a.errors) errors.set(k, (errors.get(k) ?? 0) + n);
  return {
    last: Math.max(...answers.map((a) => a.last)),
    failed: answers.reduce((n, a) => n + a.failed, 0),
    errors: [...errors],
  };
};

/** Resolves once `n` requests have arrived. */
const arrivals = (n: number): { seen: () => void; all: Promise<void> } => {
  let count = 0;
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  return { seen: () => ++count === n && done(), all };
};

describe('storm-client.c', () => {
  it('builds with the machine C compiler', () => {
    expect(buildBenchBinary('storm-client')).toMatch(/storm-client/);
  });

  it('counts a connection caught up only once the whole marker arrived, wherever the reads cut it', async () => {
    // Connection k sends the marker cut after k % length bytes, the rest only once every
    // connection has its first part: a client that matched a prefix would report early.
    const total = MARKER.length * 2;
    const firstParts = arrivals(total);
    let k = 0;
    const seenHeaders: string[] = [];
    const url = await serve((req, res) => {
      seenHeaders.push(`${req.headers['last-event-id']}|${req.headers.accept}`);
      const cut = k++ % MARKER.length;
      // Close-delimited, as the gateway's SSE is: chunked framing would put bytes inside the marker.
      res.useChunkedEncodingByDefault = false;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.socket?.setNoDelay(true);
      res.write(`id: 1\ndata: x\n\n${MARKER.slice(0, cut)}`, () => firstParts.seen());
      void firstParts.all.then(() => {
        allFirstAt ??= nowMs();
        res.write(`${MARKER.slice(cut)}data: y\n\n`);
      });
    });
    let allFirstAt: number | undefined;
    const t0 = nowMs();
    const answer = await storm(`${url}/murmur/storm/events`, total, 10_000, { 'last-event-id': '7' });
    expect(answer).toMatchObject({ failed: 0, errors: [] });
    expect(answer.last).toBeGreaterThanOrEqual(allFirstAt!);
    expect(answer.last).toBeGreaterThanOrEqual(t0);
    expect(answer.last).toBeLessThanOrEqual(nowMs());
    expect(new Set(seenHeaders)).toEqual(new Set(['7|text/event-stream']));
  });

  it('finds a marker behind more than one read of bytes (a 1,000-record page), in a Content-Length body', async () => {
    const page = `${'{"offset":1,"data":"abcdefghij"},'.repeat(6000)}"next_cursor":4242}`;
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(page) });
      res.end(page);
    });
    const driver = await stormDriver(0, 1, 3);
    drivers.push(driver);
    await driver.prepare({ url: `${url}/poll` }, '"next_cursor":4242', 10_000);
    const [answer] = await driver.go();
    expect(answer).toMatchObject({ failed: 0, errors: [] });
  });

  it('reports a non-200 answer with its status and body, and never as caught up', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': 19 });
      res.end('{"error":"unknown"}');
    });
    const answer = await storm(url, 5);
    expect(answer).toEqual({ last: 0, failed: 5, errors: [['HTTP 404 {?error?:?unknown?}', 5]] });
  });

  it('reports a connection closed before its marker, and one refused', async () => {
    const url = await serve((_req, res) => {
      const socket = res.socket;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('id: 1\ndata: x\n\n', () => socket?.destroy());
    });
    expect(await storm(url, 4)).toEqual({
      last: 0,
      failed: 4,
      errors: [['closed after the response started', 4]],
    });
    const gone = new URL(url);
    const t = Date.now();
    await new Promise((r) => servers.pop()!.close(r));
    console.log('close took', Date.now() - t);
    expect(await storm(gone.href, 3)).toEqual({
      last: 0,
      failed: 3,
      errors: [['ECONNREFUSED before the response', 3]],
    });
  });

  it('fails a connection whose marker does not come within the timeout, all of it but its last byte included', async () => {
    const url = await serve((_req, res) => {
      res.useChunkedEncodingByDefault = false;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`id: 1\ndata: x\n\n${MARKER.slice(0, -1)}`);
    });
    expect(await storm(url, 2, 300)).toEqual({
      last: 0,
      failed: 2,
      errors: [['not within 300 ms after the response started', 2]],
    });
  });
});
