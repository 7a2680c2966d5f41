/**
 * writeToSocket over real loopback TCP: straight to the descriptor while Node holds nothing for the
 * socket (Node's own byte count does not move), through socket.write in order once the kernel stops
 * taking bytes, never to the descriptor of a socket that is gone (its number may be another
 * connection's by then), and never to an encrypted socket's.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { writeToSocket } from '../../src/http/socket-write.js';

let cleanup: (() => void)[] = [];
afterEach(() => {
  for (const fn of cleanup) fn();
  cleanup = [];
});

/** A connected pair on loopback: `server` is the accepted side we write to, `client` reads. */
const pair = async (): Promise<{ server: net.Socket; client: net.Socket; received: () => Buffer }> => {
  const listener = net.createServer();
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => listener.once('connection', r));
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  const server = await accepted;
  listener.close();
  const chunks: Buffer[] = [];
  client.on('data', (d: Buffer) => chunks.push(d));
  client.on('error', () => {});
  server.on('error', () => {});
  cleanup.push(() => {
    client.destroy();
    server.destroy();
  });
  return { server, client, received: () => Buffer.concat(chunks) };
};

const until = async (pred: () => boolean, what: string): Promise<void> => {
  for (let i = 0; !pred(); i++) {
    if (i > 2000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
};

describe('writeToSocket', () => {
  it('writes to the descriptor while Node holds nothing for the socket', async () => {
    const { server, received } = await pair();
    writeToSocket(server, Buffer.from('data: one\n\n'));
    writeToSocket(server, Buffer.from('data: two\n\n'));
    expect(server.writableLength).toBe(0);
    expect(server.bytesWritten).toBe(0);
    await until(() => received().length === 22, 'both events');
    expect(received().toString()).toBe('data: one\n\ndata: two\n\n');
  });

  it('falls back to socket.write when the kernel stops taking bytes, keeping every byte in order', async () => {
    const { server, client, received } = await pair();
    client.pause();
    // Numbered 64 KB blocks until the kernel's buffers are full and Node holds the rest, then more.
    const block = (i: number): Buffer => Buffer.alloc(64 * 1024, String.fromCharCode(97 + (i % 26)));
    let n = 0;
    while (server.writableLength === 0) {
      if (n > 4000) throw new Error('the send buffer never filled');
      writeToSocket(server, block(n++));
    }
    const heldAt = n;
    for (let i = 0; i < 5; i++) writeToSocket(server, block(n++));
    expect(server.writableLength).toBeGreaterThan(0);
    // While the reader drains, the kernel has room again before Node has written what it holds: a
    // write then must still queue behind those bytes, not jump ahead of them.
    let during = 0;
    const more = (): void => {
      if (server.writableLength > 0 && during < 20) {
        during++;
        writeToSocket(server, block(n++));
      }
    };
    client.on('data', more);
    client.resume();
    await until(() => received().length === n * 64 * 1024, `${n} blocks`);
    expect(during).toBeGreaterThan(0);
    const got = received();
    for (let i = 0; i < n; i++) {
      const at = i * 64 * 1024;
      expect(
        got.subarray(at, at + 64 * 1024).equals(block(i)),
        `block ${i} of ${n} (held from ${heldAt})`,
      ).toBe(true);
    }
  });

  it('never writes to the descriptor of a destroyed socket, which another connection may hold now', async () => {
    const first = await pair();
    const fd = (first.server as unknown as { _handle: { fd: number } })._handle.fd;
    first.server.destroy();
    const second = await pair();
    const fds = [second.server, second.client].map(
      (s) => (s as unknown as { _handle: { fd: number } })._handle.fd,
    );
    // The freed number went to the next connection: this is the case the check exists for.
    expect(fds).toContain(fd);
    const back: Buffer[] = [];
    second.server.on('data', (d: Buffer) => back.push(d));
    writeToSocket(first.server, Buffer.from('stray'));
    writeToSocket(second.server, Buffer.from('mine'));
    writeToSocket(second.client, Buffer.from('back'));
    // Each side's own bytes arrive after anything a stray write would have put before them.
    await until(() => second.received().length >= 4 && Buffer.concat(back).length >= 4, 'both sides');
    expect(second.received().toString()).toBe('mine');
    expect(Buffer.concat(back).toString()).toBe('back');
  });

  it('leaves an encrypted socket to socket.write', async () => {
    const { server, received } = await pair();
    (server as net.Socket & { encrypted?: boolean }).encrypted = true;
    writeToSocket(server, Buffer.from('via node'));
    await until(() => received().length === 8, 'the bytes');
    expect(server.bytesWritten).toBe(8);
  });
});
