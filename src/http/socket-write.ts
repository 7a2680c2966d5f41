/**
 * One Buffer to a client's socket, the cheap way when it is safe. A fan-out's write is one small
 * Buffer per connection per event; through `socket.write` each one walks Node's Writable (a write
 * request object, the state machine, a nextTick after it) before the same write(2): about a fifth
 * of the server's CPU per delivered event in `perf`, and a bare sender measured 0.6–1.2 µs less per
 * 200-byte write with `fs.writeSync` on the descriptor (9.5 against 8.6 µs at 1,000 × 40).
 *
 * So when Node holds nothing for the socket (nothing buffered, nothing in flight, not corked) the
 * bytes go to its descriptor directly; what the kernel does not take (a full send buffer, a partial
 * write) and every error go through `socket.write` as before, which queues them in order, waits
 * for the socket to drain and reports errors as it always did. Only plain TCP sockets of this
 * process qualify: a TLS socket's descriptor carries ciphertext, and a socket without a handle (closed,
 * or not a libuv TCP handle) has no descriptor that is still its own.
 */
import { writeSync } from 'node:fs';
import type { Socket } from 'node:net';

type Handle = { fd?: unknown } | null | undefined;

/** The socket's descriptor while it is open and plain TCP; -1 otherwise. */
const descriptor = (socket: Socket): number => {
  if ((socket as Socket & { encrypted?: boolean }).encrypted) return -1;
  // Read at every write, never kept: once the socket is destroyed its handle is gone and the
  // number may already belong to another connection.
  const fd = (socket as unknown as { _handle: Handle })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : -1;
};

/** Write `bytes` to a writable socket, in order after anything Node already holds for it. */
export const writeToSocket = (socket: Socket, bytes: Buffer): void => {
  if (socket.writableLength === 0 && socket.writableCorked === 0) {
    const fd = descriptor(socket);
    if (fd >= 0) {
      let written = 0;
      try {
        written = writeSync(fd, bytes);
      } catch {
        // EAGAIN (the send buffer is full) or the connection's own error: socket.write handles both.
      }
      if (written === bytes.length) return;
      if (written > 0) bytes = bytes.subarray(written);
    }
  }
  socket.write(bytes);
};
