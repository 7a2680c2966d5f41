/**
 * Incremental SSE reader for upstream capsule streams: bytes in, frames out, synchronously per chunk.
 * Hand-rolled rather than eventsource-parser because ingestion needs "no `id:` line" (null) kept apart
 * from an empty id, per frame, and the data line byte for byte. Connection handling is left to callers.
 */
import { StringDecoder } from 'node:string_decoder';

/** One SSE frame as the capsule wrote it. */
export interface SseFrame {
  /** The `event:` value; `message` when the frame had no event line (SSE default). */
  event: string;
  /** The `id:` value of THIS frame, or null when it had no id line (never inherited). */
  upstreamId: string | null;
  /** The data line(s) after `data:` and one optional space, joined with `\n` when several. */
  data: string;
}

export interface SseReaderHandlers {
  onFrame(frame: SseFrame): void;
  /** A comment line, without its leading `:` (e.g. `heartbeat`). */
  onComment?(text: string): void;
}

/**
 * Feed chunks with `push`; frames are dispatched synchronously, in order. Lines end with `\n`
 * (spec "Frame format"); a `\r` before the `\n` is tolerated and dropped. A frame without any data
 * line is not dispatched (SSE rule), nor is a frame cut off by end of stream.
 */
export class SseFrameReader {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  private atStart = true;
  private event: string | null = null;
  private id: string | null = null;
  private data: string[] = [];

  constructor(private readonly handlers: SseReaderHandlers) {}

  push(chunk: Buffer | string): void {
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    if (this.atStart && text.length > 0) {
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      this.atStart = false;
    }
    let buf = this.pending + text;
    let start = 0;
    for (let nl = buf.indexOf('\n', start); nl !== -1; nl = buf.indexOf('\n', start)) {
      let end = nl;
      if (end > start && buf.charCodeAt(end - 1) === 13) end--;
      this.line(buf.slice(start, end));
      start = nl + 1;
    }
    buf = buf.slice(start);
    this.pending = buf;
  }

  /** Bytes received but not yet a complete frame (an unfinished frame is discarded at end of stream). */
  hasPartial(): boolean {
    return this.pending.length > 0 || this.data.length > 0 || this.event !== null || this.id !== null;
  }

  private line(line: string): void {
    if (line.length === 0) {
      this.dispatch();
      return;
    }
    if (line.charCodeAt(0) === 58 /* ':' */) {
      this.handlers.onComment?.(line.slice(1));
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.event = value;
        break;
      case 'id':
        this.id = value;
        break;
      default:
        break; // `retry` and unknown fields: ignored (spec "Unknown frames and keys")
    }
  }

  private dispatch(): void {
    const { event, id, data } = this;
    this.event = null;
    this.id = null;
    this.data = [];
    if (data.length === 0) return;
    this.handlers.onFrame({
      event: event === null || event === '' ? 'message' : event,
      upstreamId: id,
      data: data.length === 1 ? data[0]! : data.join('\n'),
    });
  }
}
