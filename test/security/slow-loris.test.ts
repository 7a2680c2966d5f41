/**
 * Request receipt is bounded (limits.headersTimeoutSeconds, limits.bodyTimeoutSeconds) while a
 * long-lived stream is not cut: raw sockets that never finish their headers or their body are
 * closed; an SSE stream opened before them still gets heartbeats after they were cut.
 */
import { connect, type Socket } from 'node:net';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { clientIpResolver } from '../../src/auth/client-ip.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
afterEach(async () => {
  await gw?.close();
  await sim?.stop();
  gw = null;
  sim = null;
});

/** Everything the server wrote until it closed the socket. */
const untilClosed = (socket: Socket): Promise<string> =>
  new Promise((resolve) => {
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(got));
  });

describe('slow-loris', () => {
  it('cuts unfinished headers and unfinished bodies, not a long SSE stream', async () => {
    sim = await startSimulator();
    gw = await startTestGateway({
      capsules: { cap: sim.url },
      config: { heartbeatMs: 50 },
      extra: { server: { headersTimeoutMs: 300, bodyTimeoutMs: 300 } },
    });
    const { port } = gw.gateway;
    const stream = await fetch(`${gw.baseUrl}/murmur/cap/events`);
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const heartbeats = (): number => text.split(':heartbeat').length - 1;
    const readUntil = async (pred: () => boolean): Promise<void> => {
      while (!pred()) {
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended');
        text += decoder.decode(value, { stream: true });
      }
    };

    // Headers a byte at a time, never finished: closed by the server.
    const slowHeaders = connect(port, '127.0.0.1');
    const headersClosed = untilClosed(slowHeaders);
    slowHeaders.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    const drip = setInterval(() => slowHeaders.writable && slowHeaders.write('X'), 20);
    // A body announced and never completed: 408, then closed.
    const slowBody = connect(port, '127.0.0.1');
    const bodyClosed = untilClosed(slowBody);
    slowBody.write(
      'POST /murmur/cap/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jsonrpc"',
    );
    await headersClosed;
    clearInterval(drip);
    const answered = await bodyClosed;
    expect(answered).toMatch(/^HTTP\/1\.1 408 /);

    // The stream opened before both is still served after both were cut.
    const before = heartbeats();
    await readUntil(() => heartbeats() >= before + 2);
    await reader.cancel();
  });
});

describe('trustProxy', () => {
  const ipOf = async (
    trust: false | number | string[],
    xff: string | null,
    peer: string,
  ): Promise<string> => {
    const app = new Hono();
    const resolve = clientIpResolver(trust);
    app.get('/', (c) => c.text(resolve(c)));
    const res = await app.request(
      '/',
      { headers: xff === null ? {} : { 'x-forwarded-for': xff } },
      { incoming: { socket: { remoteAddress: peer } } },
    );
    return res.text();
  };

  it('takes the socket peer by default, never a client-written X-Forwarded-For', async () => {
    expect(await ipOf(false, '1.2.3.4', '::ffff:10.0.0.9')).toBe('10.0.0.9');
  });

  it('counts hops from the right', async () => {
    expect(await ipOf(1, '1.2.3.4', '10.0.0.9')).toBe('1.2.3.4');
    // A forged leftmost entry is ignored: the balancer appended the real client.
    expect(await ipOf(1, '6.6.6.6, 1.2.3.4', '10.0.0.9')).toBe('1.2.3.4');
    expect(await ipOf(2, '6.6.6.6, 1.2.3.4, 10.0.0.7', '10.0.0.9')).toBe('1.2.3.4');
    expect(await ipOf(1, null, '10.0.0.9')).toBe('10.0.0.9');
  });

  it('skips trusted proxies by address or CIDR', async () => {
    expect(await ipOf(['10.0.0.0/8'], '6.6.6.6, 1.2.3.4, 10.0.0.7', '10.0.0.9')).toBe('1.2.3.4');
    // A peer that is not a trusted proxy is the client, whatever it forwards.
    expect(await ipOf(['10.0.0.0/8'], '1.2.3.4', '192.168.1.1')).toBe('192.168.1.1');
    expect(() => clientIpResolver(['not-an-ip'])).toThrow(/trustProxy/);
  });
});
