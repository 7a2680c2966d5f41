/**
 * Finds live-stream sockets whose peer stopped acknowledging what we send (a client cut by a
 * partition: no RST, no FIN). A stream always has bytes going out (events, heartbeats), so TCP
 * keep-alive never probes it, and the kernel retransmits for many minutes before it gives up; the
 * bytes sit in the kernel's send buffer, so nothing in user space ever backs up either.
 *
 * The kernel does say it: `/proc/net/tcp{,6}` lists, per socket (by inode), the bytes sent and not
 * acknowledged and how many retransmission timeouts fired without an ACK. A socket whose
 * retransmission timer keeps firing for `stallMs` is destroyed: its 'close' ends its stream like
 * any disconnect. One read of the table per `checkMs` for the whole process (less often when the
 * table is large: SCAN_SPACING), and only while sockets are watched. Linux only; elsewhere (no
 * table) nothing is watched and keep-alive alone applies.
 */
import { closeSync, openSync, readSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';

interface Watched {
  inode: string;
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

/** Bytes read from a table at a time: the tables are read through one Buffer, never as a string. */
const READ_CHUNK = 128 * 1024;
const SPACE = 0x20;
const NEWLINE = 0x0a;
const ZERO = 0x30;

/**
 * One line of a table, [start, end): its inode when its retransmission timer is running (`tr` 01)
 * with a non-zero retransmit count, else nothing. Fields: sl local rem st tx:rx tr:when retrnsmt uid
 * timeout inode … Most lines stop at the `tr` field (no timer running); no string is made for them.
 */
const scanLine = (b: Buffer, start: number, end: number, stalled: Set<string>): void => {
  let field = 0;
  let i = start;
  while (i < end) {
    while (i < end && b[i] === SPACE) i++;
    const from = i;
    while (i < end && b[i] !== SPACE) i++;
    if (from === i) return;
    if (field === 5) {
      // "01:" — the retransmission timer (the header's "tr" fails here too).
      if (i - from < 3 || b[from] !== ZERO || b[from + 1] !== ZERO + 1 || b[from + 2] !== 0x3a) return;
    } else if (field === 6) {
      let zero = true;
      for (let k = from; k < i; k++) if (b[k] !== ZERO) zero = false;
      if (zero) return;
    } else if (field === 9) {
      stalled.add(b.toString('latin1', from, i));
      return;
    }
    field++;
  }
};

interface ScanCost {
  busyMs: number;
}

/** Reads of a table between two turns of the event loop (each at most one page: about 27 lines). */
const READS_PER_TURN = 64;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The scans' one Buffer between scans (a fresh 128 KB a table a second was garbage too). */
let spareBuffer: Buffer | null = null;

/**
 * Scan one table into `stalled`; false when it cannot be read.
 *
 * The kernel answers a read of these tables one page at a time, whatever the buffer's size: at
 * 20,000 connections that is about 1,500 reads a table. As promises (`fs/promises`), each read was
 * a trip through libuv's pool and a handful of promise and result objects: 4 MB of garbage a
 * second at 19,500 idle followers, enough to keep V8's memory reducer from ever running, so the
 * heap grown by a burst of connections was never given back. Synchronous reads allocate nothing;
 * taken `READS_PER_TURN` at a time (at most a few milliseconds of kernel time at 19,500 followers)
 * they leave the event loop free between slices.
 */
const scanTable = async (path: string, stalled: Set<string>, cost: ScanCost): Promise<boolean> => {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return false;
  }
  // A scan that finds the spare taken (two at once: tests) makes its own.
  const buf = spareBuffer ?? Buffer.allocUnsafe(READ_CHUNK);
  spareBuffer = null;
  try {
    // Bytes of an unfinished line, moved to the front of the buffer before the next read.
    let kept = 0;
    let sliceStart = performance.now();
    for (let reads = 1; ; reads++) {
      if (reads % READS_PER_TURN === 0) {
        cost.busyMs += performance.now() - sliceStart;
        await nextTurn();
        sliceStart = performance.now();
      }
      const bytesRead = readSync(fd, buf, kept, buf.length - kept, null);
      const end = kept + bytesRead;
      let start = 0;
      // No view per read: a newline found past `end` is a stale byte of an earlier read.
      for (let nl = buf.indexOf(NEWLINE, start); nl >= 0 && nl < end; nl = buf.indexOf(NEWLINE, start)) {
        scanLine(buf, start, nl, stalled);
        start = nl + 1;
      }
      if (bytesRead === 0) {
        if (start < end) scanLine(buf, start, end, stalled);
        cost.busyMs += performance.now() - sliceStart;
        return true;
      }
      kept = end - start;
      // A line longer than the buffer is no table line: dropped.
      if (kept === buf.length) kept = 0;
      else buf.copy(buf, 0, start, end);
    }
  } catch {
    return true;
  } finally {
    closeSync(fd);
    spareBuffer = buf;
  }
};

/**
 * Inodes of sockets whose retransmission timer has fired at least once without an ACK (timer 1 and a
 * non-zero retransmit count): the peer has not acknowledged data for at least one RTO. Read through
 * one Buffer, never as a string: the kernel writes a line of 150 bytes per socket, so at 20,000
 * connections (both ends on loopback) a table is 6 MB. Read as a string each second, that was 6 MB
 * of garbage a second in old space, which kept an idle replica's RSS swinging by 100 MB.
 */
export const unacknowledgedInodes = async (
  tables: readonly string[] = TABLES,
  /** Adds the main thread's time spent reading the tables (their reads are synchronous). */
  cost: ScanCost = { busyMs: 0 },
): Promise<Set<string> | null> => {
  const stalled = new Set<string>();
  let read = false;
  for (const table of tables) if (await scanTable(table, stalled, cost)) read = true;
  return read ? stalled : null;
};

export interface SendStallOptions {
  /** A socket unacknowledged this long is destroyed. */
  stallMs: number;
  /**
   * How often the kernel's table is read while sockets are watched, at most: default
   * min(1000, stallMs / 4). A table whose reading took more than 1/50 of that apart is read less
   * often (below).
   */
  checkMs?: number;
  /** Told about each socket destroyed (logs). */
  onStall?: (socket: Socket, stalledMs: number) => void;
}

/**
 * The next check waits at least this many times the last one's main-thread time: the reads are
 * synchronous, and the kernel takes about 70 ms to write its table at 19,500 connections (both ends
 * on loopback), so reading it every second would be 7 % of the event loop. Capped at 2 %: a stall
 * is then found a few seconds later at that many connections, never at the usual few hundred.
 */
const SCAN_SPACING = 50;

export class SendStallWatch {
  private readonly watched = new Map<string, Watched>();
  /** While sockets are watched: the next check is due, or one is under way. */
  private active = false;
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
    const entry: Watched = { inode, socket, stalledSince: null };
    this.watched.set(inode, entry);
    // 'close' fires once: `on` spares the wrapper and state object a `once` costs per socket.
    socket.on('close', () => {
      if (this.watched.get(inode) === entry) this.watched.delete(inode);
      if (this.watched.size === 0) this.stop();
    });
    if (!this.active) {
      this.active = true;
      if (!this.checking) this.schedule(this.checkMs);
    }
  }

  close(): void {
    this.stop();
    this.watched.clear();
  }

  private stop(): void {
    this.active = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      this.check();
    }, ms);
    this.timer.unref();
  }

  private check(): void {
    this.checking = true;
    const cost = { busyMs: 0 };
    void unacknowledgedInodes(TABLES, cost).then((stalled) => {
      this.checking = false;
      this.apply(stalled);
      if (this.active && this.timer === null)
        this.schedule(Math.max(this.checkMs, Math.round(cost.busyMs * SCAN_SPACING)));
    });
  }

  private apply(stalled: Set<string> | null): void {
    if (!this.active) return; // closed, or nothing watched any more
    if (stalled === null) {
      this.unsupported = true;
      this.close();
      return;
    }
    const now = Date.now();
    // Values, not entries: an [inode, entry] pair per watched socket per check is garbage too.
    for (const entry of this.watched.values()) {
      const { inode } = entry;
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
