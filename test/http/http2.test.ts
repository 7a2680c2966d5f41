/**
 * HTTP/2 served by the gateway: with `tls` the port speaks HTTPS with ALPN `h2` and falls back to
 * HTTP/1.1; with `http2.cleartext` it speaks h2c (prior knowledge) and HTTP/1.1 on one port. Every
 * surface's live SSE and long-poll run as streams of ONE HTTP/2 connection at once, each getting
 * the whole task; a drain sends GOAWAY and ends the streams; the connection-specific headers the
 * HTTP/1.1 wire carries never reach an HTTP/2 response (nghttp2 would refuse them).
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

let certDir = '';
let ca: Buffer;
beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), 'mg-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout',
      join(certDir, 'key.pem'),
      '-out',
      join(certDir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  ca = readFileSync(join(certDir, 'cert.pem'));
});

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let session: ClientHttp2Session | null = null;
afterEach(async () => {
  session?.destroy();
  await gw?.close();
  await sim?.stop();
  session = null;
  gw = null;
  sim = null;
});

interface H2Answer {
  headers: IncomingHttpHeaders;
  /** Resolves with everything read once `until` holds of it (or the stream ended). */
  text: Promise<string>;
  ended: Promise<void>;
}

/** One request as one stream of `s`; reads until `until(body)` holds or the stream ends. */
const h2 = (
  s: ClientHttp2Session,
  path: string,
  until: (body: string) => boolean = () => false,
  init: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<H2Answer> =>
  new Promise((resolve, reject) => {
    const req = s.request({ ':path': path, ':method': init.method ?? 'GET', ...init.headers });
    if (init.body !== undefined) req.end(init.body);
    else req.end();
    let body = '';
    let settle: (v: string) => void;
    const text = new Promise<string>((r) => (settle = r));
    const ended = new Promise<void>((r) => req.once('close', () => r()));
    req.setEncoding('utf8');
    req.on('data', (d: string) => {
      body += d;
      if (until(body)) settle(body);
    });
    req.once('end', () => settle(body));
    req.once('error', reject);
    req.once('response', (headers) => resolve({ headers, text, ended }));
  });

const json = { 'content-type': 'application/json' };

describe('HTTP/2', () => {
  it('TLS: ALPN h2, every surface live and long-poll as streams of one connection; HTTP/1.1 still served', async () => {
    sim = await startSimulator({ heartbeatMs: 200 });
    gw = await startTestGateway({
      capsules: { cap: sim.url },
      extra: { server: { tls: { cert: join(certDir, 'cert.pem'), key: join(certDir, 'key.pem') } } },
    });
    expect(gw.baseUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(gw.gateway.protocols).toBe('h2+http/1.1');
    session = connect(gw.baseUrl, { ca });
    const s = session;
    await new Promise<void>((r) => s.once('connect', () => r()));
    expect(s.alpnProtocol).toBe('h2');

    const done = (reply: string) => (body: string) => body.includes(reply);
    // A Flue conversation and a BeeOS task, both through the queue, both over this connection.
    const flue = await h2(s, '/flue/cap/h2-conv', undefined, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ kind: 'user', body: '#sim {"reply":"flue-over-h2","delayMs":20}' }),
    });
    expect(flue.headers[':status']).toBe(202);
    const admitted = JSON.parse(await flue.text) as { offset: string };
    const task = await h2(s, '/api/v1/agents/cap/tasks', undefined, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ message: '#sim {"reply":"beeos-over-h2","delayMs":20}' }),
    });
    const created = JSON.parse(await task.text) as { data: { task_id: string } };

    const streams = await Promise.all([
      h2(s, '/murmur/cap/events', done('beeos-over-h2')),
      h2(s, '/v1/stream/murmur/cap?offset=-1&live=sse', done('beeos-over-h2')),
      h2(s, `/flue/cap/h2-conv?view=updates&offset=${admitted.offset}&live=sse`, done('flue-over-h2')),
      h2(s, `/api/v1/agents/cap/tasks/${created.data.task_id}/events`, done('beeos-over-h2')),
    ]);
    for (const st of streams) {
      expect(st.headers[':status']).toBe(200);
      expect(st.headers['content-type']).toMatch(/^text\/event-stream/);
      // Connection-specific headers of the HTTP/1.1 wire have no place in HTTP/2.
      expect(st.headers.connection).toBeUndefined();
      expect(st.headers['keep-alive']).toBeUndefined();
    }
    const texts = await Promise.all(streams.map((st) => st.text));
    expect(texts[0]).toContain('flue-over-h2');
    expect(texts[1]).toContain('flue-over-h2');
    expect(texts[2]).toContain('flue-over-h2');
    expect(texts[3]).toContain('beeos-over-h2');
    // A long-poll on the same connection, after the fact: the whole log at once.
    const poll = await h2(s, '/murmur/cap/poll?after=0&limit=1000');
    expect(poll.headers[':status']).toBe(200);
    const page = JSON.parse(await poll.text) as { records: unknown[] };
    expect(JSON.stringify(page.records)).toContain('beeos-over-h2');

    // HTTP/1.1 over TLS on the same port (a client without h2).
    const h1 = await new Promise<{ status: number; version: string }>((resolve, reject) => {
      const agent = new Agent({ ca, ALPNProtocols: ['http/1.1'] });
      const req = httpsRequest(`${gw!.baseUrl}/healthz`, { agent }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, version: res.httpVersion });
      });
      req.once('error', reject);
      req.end();
    });
    expect(h1).toEqual({ status: 200, version: '1.1' });
  });

  it('h2c beside HTTP/1.1 on one cleartext port, and a drain sends GOAWAY and ends the live streams', async () => {
    sim = await startSimulator({ heartbeatMs: 200 });
    gw = await startTestGateway({
      capsules: { cap: sim.url },
      extra: { server: { http2: { cleartext: true }, bodyTimeoutMs: 300 } },
    });
    expect(gw.gateway.protocols).toBe('h2c+http/1.1');
    // HTTP/1.1 first (fetch), then HTTP/2 with prior knowledge, same port.
    expect((await fetch(`${gw.baseUrl}/healthz`)).status).toBe(200);
    session = connect(gw.baseUrl);
    const s = session;
    const goaway = new Promise<void>((r) => s.once('goaway', () => r()));
    // A body that never completes is answered 408 and reset; the connection's other streams go on.
    const slow = s.request({
      ':path': '/flue/cap/slow',
      ':method': 'POST',
      'content-type': 'application/json',
    });
    slow.write('{"kind":');
    const [slowStatus] = (await once(slow, 'response')) as [IncomingHttpHeaders];
    expect(slowStatus[':status']).toBe(408);
    await once(slow, 'close');
    expect((await h2(s, '/healthz')).headers[':status']).toBe(200);
    const live = await h2(s, '/murmur/cap/events', (b) => b.includes('h2c-reply'));
    expect(live.headers[':status']).toBe(200);
    await sim.submit('#sim {"reply":"h2c-reply"}').done;
    expect(await live.text).toContain('h2c-reply');
    const draining = gw.close();
    gw = null;
    await goaway;
    await live.ended;
    await draining;
  });
});
