/**
 * Incremental SSE reader for upstream capsule streams: bytes in, frames out, synchronously per chunk,
 * on `eventsource-parser` (v3). It reports each event's own `id` (undefined when the frame had no id
 * line, '' for an empty one, never inherited from the previous frame), which is what ingestion needs
 * to keep "no id" (null) apart from an empty id; `maxBufferSize` bounds what a hostile or broken
 * upstream can make us hold for one unfinished frame. Connection handling is left to callers.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceParser } from 'eventsource-parser';

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
  /** The upstream sent more than `maxFrameChars` without finishing a frame: stop reading it. */
  onOversize?(message: string): void;
}

/** Default bound on one unfinished frame (characters): far above any tool artifact a capsule writes. */
const DEFAULT_MAX_FRAME_CHARS = 16 * 1024 * 1024;

/**
 * Feed chunks with `push`; frames are dispatched synchronously, in order. A frame without any data
 * line is not dispatched (SSE rule), nor is a frame cut off by end of stream.
 */
export class SseFrameReader {
  private readonly decoder = new StringDecoder('utf8');
  private readonly parser: EventSourceParser;
  private atStart = true;
  private failed = false;

  constructor(handlers: SseReaderHandlers, maxFrameChars = DEFAULT_MAX_FRAME_CHARS) {
    this.parser = createParser({
      onEvent: (e) =>
        handlers.onFrame({
          event: e.event === undefined || e.event === '' ? 'message' : e.event,
          upstreamId: e.id ?? null,
          data: e.data,
        }),
      onComment: handlers.onComment ? (c) => handlers.onComment!(c) : undefined,
      onError: (err) => {
        if (err.type !== 'max-buffer-size-exceeded') return; // `retry` values: ignored (spec "Unknown frames")
        this.failed = true;
        handlers.onOversize?.(err.message);
      },
      maxBufferSize: maxFrameChars,
    });
  }

  push(chunk: Buffer | string): void {
    if (this.failed) return;
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    if (this.atStart && text.length > 0) {
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a decoded BOM (the parser checks bytes)
      this.atStart = false;
    }
    if (text.length > 0) this.parser.feed(text);
  }
}
