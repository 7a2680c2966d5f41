/**
 * A ReadableStream the BeeOS handlers write SSE text into, with backpressure (`ready()`) and one
 * cleanup callback run exactly once on close, client cancel or request abort.
 */
const encoder = new TextEncoder();

export class SseWriter {
  readonly stream: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private waiters: (() => void)[] = [];
  private cleanups: (() => void)[] = [];
  closed = false;

  constructor(signal: AbortSignal) {
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          this.controller = c;
        },
        pull: () => this.release(),
        cancel: () => this.finish(false),
      },
      { highWaterMark: 64 },
    );
    if (signal.aborted) queueMicrotask(() => this.finish(false));
    else signal.addEventListener('abort', () => this.finish(false), { once: true });
  }

  /** Run on close (once). */
  onClose(fn: () => void): void {
    if (this.closed) fn();
    else this.cleanups.push(fn);
  }

  write(text: string): void {
    if (this.closed) return;
    this.controller.enqueue(encoder.encode(text));
  }

  /** Resolves when the client has room for more (or the stream closed). */
  ready(): Promise<void> {
    if (this.closed || (this.controller.desiredSize ?? 1) > 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  close(): void {
    this.finish(true);
  }

  private release(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }

  private finish(closeStream: boolean): void {
    if (this.closed) return;
    this.closed = true;
    if (closeStream) {
      try {
        this.controller.close();
      } catch {
        // already errored or cancelled by the client
      }
    }
    this.release();
    for (const fn of this.cleanups.splice(0)) fn();
  }
}

export const SSE_HEADERS: Record<string, string> = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  Connection: 'keep-alive',
};
