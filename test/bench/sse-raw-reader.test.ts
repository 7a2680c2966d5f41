/**
 * The bench clients' raw SSE reader must see exactly the events a server wrote, whatever the read
 * boundaries: a bench figure counts the markers it finds, so a lost or doubled event is a wrong figure.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openRawSse, SseBody } from './sse-raw-reader.js';

const events = ['id: 1\ndata: {"text":"@1@10.5@"}\n\n', 'event: message\ndata: héllo\n\n', ': c\n\n'];
const body = events.join('');

/** `text` in chunked framing, one chunk per piece (with an extension on the first). */
const chunkedOf = (pieces: string[]): Buffer =>
  Buffer.concat([
    ...pieces.map((p, i) => {
      const b = Buffer.from(p);
      return Buffer.concat([
        Buffer.from(`${b.length.toString(16)}${i === 0 ? ';x=1' : ''}\r\n`),
        b,
        Buffer.from('\r\n'),
      ]);
    }),
    Buffer.from('0\r\n\r\n'),
  ]);

const read = (wire: Buffer, chunked: boolean, cuts: number[]): { text: string; ended: boolean } => {
  let text = '';
  let ended = false;
  const reader = new SseBody(
    chunked,
    (bytes, end) => (text += bytes.subarray(0, end).toString()),
    () => (ended = true),
  );
  let at = 0;
  for (const cut of [...cuts, wire.length]) {
    reader.push(wire, at, cut);
    at = cut;
  }
  return { text, ended };
};

describe('SseBody', () => {
  it('undoes chunked framing split at every byte, handing over whole events only', () => {
    const wire = chunkedOf([body.slice(0, 7), body.slice(7, 40), body.slice(40)]);
    for (let cut = 0; cut <= wire.length; cut++) {
      for (const second of [cut, Math.min(wire.length, cut + 3)]) {
        expect(read(wire, true, [cut, second])).toEqual({ text: body, ended: true });
      }
    }
  });

  it('reads an identity body as it comes', () => {
    const wire = Buffer.from(body);
    for (let cut = 0; cut <= wire.length; cut++) expect(read(wire, false, [cut]).text).toBe(body);
  });

  it('keeps an incomplete last event until its blank line arrives', () => {
    const wire = chunkedOf(['data: a\n\ndata: b\n']);
    expect(read(wire, true, [])).toEqual({ text: 'data: a\n\n', ended: true });
  });
});

describe('openRawSse', () => {
  let server: http.Server | null = null;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  const listen = async (handler: http.RequestListener): Promise<string> => {
    server = http.createServer(handler);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/s?x=1`;
  };

  it('reads a Node server’s chunked SSE response to its end', async () => {
    let path = '';
    const url = await listen((req, res) => {
      path = req.url ?? '';
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of events) res.write(e);
      res.end();
    });
    const got = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      let status = 0;
      let text = '';
      openRawSse(url, {
        onStatus: (s) => (status = s),
        onEvents: (bytes, end) => (text += bytes.subarray(0, end).toString()),
        onEnd: () => resolve({ status, text }),
        onError: reject,
      });
    });
    expect(path).toBe('/s?x=1');
    expect(got).toEqual({ status: 200, text: body });
  });

  it('reports a refusal’s status and no end', async () => {
    const url = await listen((_req, res) => res.writeHead(404).end('no'));
    let ended = false;
    const status = await new Promise<number>((resolve, reject) => {
      const socket = openRawSse(url, {
        onStatus: resolve,
        onEvents: () => undefined,
        onEnd: () => (ended = true),
        onError: reject,
      });
      socket.on('close', () => undefined);
    });
    expect(status).toBe(404);
    expect(ended).toBe(false);
  });
});
