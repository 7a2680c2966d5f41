/**
 * The transport's fallback where no Node response is behind the Hono context (`app.request` in unit
 * tests, other runtimes): the same stream semantics over a ReadableStream body. The Node path
 * (sse-transport.ts) is what serves real clients.
 */
import type { Context } from 'hono';
import { SseStreamBase, type SseOptions, type SseStream } from './sse-stream.js';

const BASE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

class WebSseStream extends SseStreamBase {
  readonly body: ReadableStream<Uint8Array>;
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  private readonly bodyHighWater: number;

  constructor(
    options: SseOptions,
    private readonly signal: AbortSignal | null,
  ) {
    super(options);
    this.bodyHighWater = Math.max(1, this.maxQueued);
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        pull: () => this.drained(),
        cancel: () => this.terminate(),
      },
      { highWaterMark: this.bodyHighWater, size: (chunk) => chunk.byteLength },
    );
    if (signal?.aborted) this.terminate();
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  private readonly onAbort = (): void => this.terminate();

  protected sinkQueued(): number {
    const desired = this.controller?.desiredSize ?? this.bodyHighWater;
    return Math.max(0, this.bodyHighWater - desired);
  }

  protected sinkStarted(): boolean {
    return true;
  }

  protected sinkReady(): boolean {
    return this.controller !== null;
  }

  protected sinkWrite(chunks: Buffer[]): void {
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (bytes.length === 0) return;
    try {
      this.controller!.enqueue(bytes);
    } catch {
      this.terminate();
    }
  }

  protected sinkWriteOne(chunk: Buffer): void {
    this.sinkWrite([chunk]);
  }

  protected sinkEnd(chunks: Buffer[]): void {
    if (chunks.length > 0) this.sinkWrite(chunks);
    try {
      this.controller!.close();
    } catch {
      // already closed by a cancel racing us
    }
    this.terminate();
  }

  protected sinkDestroy(): void {
    try {
      this.controller?.error(new Error('stream destroyed'));
    } catch {
      // already closed
    }
  }

  protected override terminate(): void {
    this.signal?.removeEventListener('abort', this.onAbort);
    super.terminate();
  }
}

export const startWebSse = (
  c: Context,
  status: number,
  options: SseOptions,
): { stream: SseStream; response: Response } => {
  const stream = new WebSseStream(options, c.req.raw.signal ?? null);
  const headers = { ...BASE_HEADERS, ...(options.headers ?? {}) };
  return { stream, response: new Response(stream.body, { status, headers }) };
};
