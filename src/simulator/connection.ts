/**
 * One open streaming connection: the heartbeat from connection open (never reset by frames) and the
 * live queue that stands in for the capsule's broadcast receiver (spec "Frames a connection misses"):
 * while the socket cannot take more, frames queue; past the bound the OLDEST are dropped silently.
 */
import type { ServerResponse } from 'node:http';
import { HEARTBEAT, type Frame } from './frames.js';
import { laggedFrame } from './sequence-ids.js';

export interface ConnectionOptions {
  heartbeatMs: number;
  queueSize: number;
  /** `message/stream`: end after writing the first live final status. */
  closeOnLiveFinal: boolean;
  /** 0.5+: close only on the final of the task this connection submitted (`ownTaskId`). */
  closesOnOwnFinal?: boolean;
  /** 0.4+: tell the reader how many frames it lost (`lagged`) instead of losing them silently. */
  reportsLag?: boolean;
  onClose: (conn: Connection) => void;
}

export class Connection {
  private readonly queue: Frame[] = [];
  private blocked = false;
  private heartbeatDue = false;
  private ending = false;
  private closed = false;
  private readonly timer: NodeJS.Timeout;
  /** Frames this connection dropped because it fell behind (for tests and logs; never written). */
  dropped = 0;
  /** 0.4+: dropped frames not yet reported in a `lagged` frame. */
  private missed = 0;
  /** 0.4+: the last id its replay wrote; live frames up to it are dropped, not written twice. */
  private replayedThrough: bigint | null = null;
  /** The task a `message/stream` submitted (0.5+ closes on its final only; 0.5+ rejects it by id). */
  ownTaskId: string | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly opts: ConnectionOptions,
  ) {
    this.timer = setInterval(() => this.heartbeat(), opts.heartbeatMs);
    this.timer.unref();
    res.on('drain', () => {
      this.blocked = false;
      this.pump();
    });
    res.on('close', () => this.cleanup());
  }

  /** A stream/watch connection (it never closes on a final status). */
  get isWatch(): boolean {
    return !this.opts.closeOnLiveFinal;
  }

  get isOpen(): boolean {
    return !this.closed && !this.ending;
  }

  /** Write outside the live queue (connection-ack, replay, error, rejected): nothing is dropped. */
  writeDirect(bytes: string): void {
    if (!this.isOpen) return;
    if (!this.res.write(bytes)) this.blocked = true;
  }

  /** Write a replay; on a line that dedups (0.4+), remember its last id so live copies are skipped. */
  writeReplay(frames: Frame[], dedupLive: boolean): void {
    for (const f of frames) {
      this.writeDirect(f.bytes);
      if (dedupLive && f.id !== null) this.replayedThrough = f.id;
    }
  }

  /** A live broadcast frame: queued behind anything pending; the oldest falls off past the bound. */
  deliver(frame: Frame): void {
    if (!this.isOpen) return;
    if (this.replayedThrough !== null && frame.id !== null && frame.id <= this.replayedThrough) return;
    this.queue.push(frame);
    while (this.queue.length > this.opts.queueSize) {
      this.queue.shift();
      this.dropped += 1;
      if (this.opts.reportsLag) this.missed += 1;
    }
    this.pump();
  }

  /** Flush what is queued, optionally add a last frame, then end the response and the socket. */
  finish(last?: Frame): void {
    if (!this.isOpen) return;
    if (last) this.queue.push(last);
    this.ending = true;
    this.pump();
  }

  /** Drop the TCP connection at once (network cut, process exit): nothing more is written. */
  destroy(): void {
    this.cleanup();
    this.res.socket?.destroy();
  }

  private heartbeat(): void {
    if (this.closed) return;
    if (this.blocked) this.heartbeatDue = true;
    else if (!this.res.write(HEARTBEAT)) this.blocked = true;
  }

  private pump(): void {
    if (this.closed) return;
    if (this.heartbeatDue && !this.blocked) {
      this.heartbeatDue = false;
      if (!this.res.write(HEARTBEAT)) this.blocked = true;
    }
    while (!this.blocked && this.queue.length > 0) {
      if (this.missed > 0) {
        // The loss is reported where it happened: before the oldest frame still queued.
        const missed = this.missed;
        this.missed = 0;
        if (!this.res.write(laggedFrame(missed).bytes)) {
          this.blocked = true;
          continue;
        }
      }
      const frame = this.queue.shift() as Frame;
      if (!this.res.write(frame.bytes)) this.blocked = true;
      if (frame.final && this.opts.closeOnLiveFinal && this.closesOn(frame)) {
        // The first live final status of any task closes message/stream; later frames are never sent.
        this.queue.length = 0;
        this.ending = true;
      }
    }
    if (this.ending && this.queue.length === 0) this.end();
  }

  /** Whether a live final closes this message/stream: any task's (spec), or its own (0.5+). */
  private closesOn(frame: Frame): boolean {
    if (!this.opts.closesOnOwnFinal) return true;
    return (JSON.parse(frame.data) as { id?: unknown }).id === this.ownTaskId;
  }

  private end(): void {
    if (this.closed) return;
    this.cleanup();
    const socket = this.res.socket;
    // The body ends when the connection closes (spec "Endpoints"): close the socket once flushed.
    this.res.end(() => socket?.end());
  }

  private cleanup(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.opts.onClose(this);
  }
}
