/**
 * Finds live-stream sockets whose peer stopped acknowledging what we send (a client cut by a
 * partition: no RST, no FIN). A stream always has bytes going out (events, heartbeats), so TCP
 * keep-alive never probes it, and the kernel retransmits for many minutes before it gives up; the
 * bytes sit in the kernel's send buffer, so nothing in user space ever backs up either.
 *
 * The kernel does say it: `/proc/net/tcp{,6}` lists, per socket (by inode), the bytes sent and not
 * acknowledged and how many retransmission timeouts fired without an ACK. A socket whose
 * retransmission timer keeps firing for `stallMs` is destroyed: its 'close' ends its stream like
 * any disconnect. One read of the table per `checkMs` for the whole process, and only while sockets
 * are watched. Linux only; elsewhere (no table) nothing is watched and keep-alive alone applies.
 */
import { readlinkSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';

interface Watched {
  socket: Socket;
  /** When the retransmission timer was first seen firing without an ACK since the last progress. */
  stalledSince: number | null;
}

const TABLES = ['/proc/net/tcp', '/proc/net/tcp6'];

/** The inode of a socket's file descriptor (Linux), or null. */
const inodeOf = (socket: Socket): string | null => {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return null;
  try {
    const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
    return m ? m[1]! : null;
  } catch {
    return null;
  }
};

/**
 * Inodes of sockets whose retransmission timer has fired at least once without an ACK (timer 1 and a
 * non-zero retransmit count): the peer has not acknowledged data for at least one RTO. Read off the
 * event loop (the kernel writes one line per socket: a storm's 10,000 connections are a megabyte).
 */
export const unacknowledgedInodes = async (
  tables: readonly string[] = TABLES,
): Promise<Set<string> | null> => {
  const stalled = new Set<string>();
  let read = false;
  for (const table of tables) {
    let text: string;
    try {
      text = await readFile(table, 'latin1');
    } catch {
      continue;
    }
    read = true;
    let start = text.indexOf('\n') + 1;
    while (start > 0 && start < text.length) {
      let end = text.indexOf('\n', start);
      if (end < 0) end = text.length;
      const line = text.slice(start, end);
      start = end + 1;
      // Most sockets have no timer running: skip them before splitting the line.
      if (!line.includes(' 01:')) continue;
      // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      if (!f[5]!.startsWith('01:')) continue;
      if (f[6] === '00000000') continue;
      stalled.add(f[9]!);
    }
  }
  return read ? stalled : null;
};

export interface SendStallOptions {
  /** A socket unacknowledged this long is destroyed. */
  stallMs: number;
  /** How often the kernel's table is read while sockets are watched. Default min(1000, stallMs / 4). */
  checkMs?: number;
  /** Told about each socket destroyed (logs). */
  onStall?: (socket: Socket, stalledMs: number) => void;
}

export class SendStallWatch {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | null = null;
  private readonly checkMs: number;
  private unsupported = false;
  private checking = false;

  constructor(private readonly options: SendStallOptions) {
    this.checkMs = options.checkMs ?? Math.max(50, Math.min(1000, options.stallMs / 4));
  }

  get size(): number {
    return this.watched.size;
  }

  /** Watch `socket` until it closes. */
  watch(socket: Socket): void {
    if (this.unsupported || socket.destroyed) return;
    const inode = inodeOf(socket);
    if (inode === null) return;
    const entry: Watched = { socket, stalledSince: null };
    this.watched.set(inode, entry);
    socket.once('close', () => {
      if (this.watched.get(inode) === entry) this.watched.delete(inode);
      if (this.watched.size === 0) this.stop();
    });
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), this.checkMs);
      this.timer.unref();
    }
  }

  close(): void {
    this.stop();
    this.watched.clear();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private check(): void {
    if (this.checking) return;
    this.checking = true;
    void unacknowledgedInodes().then((stalled) => {
      this.checking = false;
      this.apply(stalled);
    });
  }

  private apply(stalled: Set<string> | null): void {
    if (this.timer === null) return; // closed, or nothing watched any more
    if (stalled === null) {
      this.unsupported = true;
      this.close();
      return;
    }
    const now = Date.now();
    for (const [inode, entry] of this.watched) {
      if (!stalled.has(inode)) {
        entry.stalledSince = null;
        continue;
      }
      entry.stalledSince ??= now;
      const stalledMs = now - entry.stalledSince;
      if (stalledMs >= this.options.stallMs) {
        this.watched.delete(inode);
        this.options.onStall?.(entry.socket, stalledMs);
        entry.socket.destroy();
      }
    }
    if (this.watched.size === 0) this.stop();
  }
}
