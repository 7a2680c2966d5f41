/**
 * GET an SSE URL on a plain TCP socket: `socket.pause()` stops reading for real (the kernel buffers
 * fill and the server's queue grows), which a fetch or http client cannot promise. Keeps every byte.
 */
import net from 'node:net';

export interface RawSseSocket {
  socket: net.Socket;
  /** Settles when the connection closes. */
  closed: Promise<void>;
  /** Resolves once `pred` holds, checked on every chunk. */
  until(pred: () => boolean): Promise<void>;
  /** Everything received so far, head included. */
  text(): string;
}

export const rawSseSocket = (url: string, encoding: BufferEncoding = 'utf8'): RawSseSocket => {
  const target = new URL(url);
  const socket = net.connect(Number(target.port), target.hostname);
  let text = '';
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const waiters = new Set<() => void>();
  socket.setEncoding(encoding);
  socket.on('error', () => {});
  socket.on('data', (d: string) => {
    text += d;
    for (const w of [...waiters]) w();
  });
  socket.write(`GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n\r\n`);
  const until = (pred: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (pred()) {
          waiters.delete(check);
          resolve();
        }
      };
      waiters.add(check);
      check();
    });
  return { socket, closed, until, text: () => text };
};
