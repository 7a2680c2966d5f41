/**
 * One SSE connection, by a streamed fetch (sees every byte and frame, sends headers; works in
 * browsers and Node 20+) or by the browser's EventSource (no headers: tickets go in the URL; only
 * the listed event names are seen). Either way it never reconnects by itself: the caller decides.
 */
import { httpError } from './auth.js';

export interface SseHandlers {
  /** Response headers arrived (fetch) or the EventSource opened. */
  onOpen(): void;
  /** Any bytes arrived, heartbeats included (fetch only; EventSource reports events only). */
  onActivity(): void;
  onEvent(event: string, id: string | null, data: string): void;
  /** The connection ended: `error` null when the server ended the response cleanly. */
  onClose(error: unknown): void;
}

export interface SseConnection {
  close(): void;
}

/**
 * An EventSource failed. It reports no HTTP status: a 401 with a stale ticket, a 403, a 404 and a
 * refused connection all look alike. `beforeOpen` says no response was ever accepted, which is
 * when the caller should find out what the gateway answers (and drop a ticket it may have reused).
 */
export class EventSourceFailed extends Error {
  constructor(readonly beforeOpen: boolean) {
    super(beforeOpen ? 'EventSource failed before it opened' : 'EventSource connection failed or ended');
  }
}

/** A minimal text/event-stream parser (WHATWG "Interpreting an event stream"), fed text chunks. */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private id: string | null = null;
  private sawData = false;

  constructor(private readonly emit: (event: string, id: string | null, data: string) => void) {}

  push(text: string): void {
    this.buffer += text;
    let start = 0;
    for (;;) {
      const match = /\r\n|\n|\r/.exec(this.buffer.slice(start));
      if (!match) break;
      // A lone \r at the very end may be the first half of \r\n: wait for more.
      if (match[0] === '\r' && start + match.index === this.buffer.length - 1) break;
      this.line(this.buffer.slice(start, start + match.index));
      start += match.index + match[0].length;
    }
    this.buffer = this.buffer.slice(start);
  }

  private line(line: string): void {
    if (line === '') {
      if (this.sawData) this.emit(this.event || 'message', this.id, this.data.join('\n'));
      this.data = [];
      this.event = '';
      this.id = null;
      this.sawData = false;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      this.data.push(value);
      this.sawData = true;
    } else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
  }
}

export const openFetchSse = (url: string, headers: Record<string, string>, h: SseHandlers): SseConnection => {
  const abort = new AbortController();
  let done = false;
  const finish = (error: unknown): void => {
    if (done) return;
    done = true;
    h.onClose(error);
  };
  void (async () => {
    const res = await fetch(url, {
      headers: { accept: 'text/event-stream', ...headers },
      signal: abort.signal,
    });
    if (!res.ok || !res.body) throw await httpError(res, 'sse');
    h.onOpen();
    const parser = new SseParser((event, id, data) => {
      if (!done) h.onEvent(event, id, data);
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end || done) break;
      h.onActivity();
      parser.push(decoder.decode(value, { stream: true }));
    }
    finish(null);
  })().catch((err: unknown) => finish(err));
  return {
    close: () => {
      done = true;
      abort.abort();
    },
  };
};

/** EventSource: `events` are the names to listen for (it cannot listen to "every" name). */
export const openEventSource = (url: string, events: readonly string[], h: SseHandlers): SseConnection => {
  const source = new EventSource(url);
  let done = false;
  let opened = false;
  source.onopen = () => {
    opened = true;
    h.onOpen();
  };
  const listen = (name: string): void =>
    source.addEventListener(name, (e: Event) => {
      // A frame named `error` arrives as a MessageEvent on the same name as connection errors.
      if (done || !(e instanceof MessageEvent)) return;
      h.onActivity();
      h.onEvent(name, e.lastEventId || null, String(e.data));
    });
  for (const name of events) listen(name);
  source.addEventListener('error', (e: Event) => {
    if (done || e instanceof MessageEvent) return;
    done = true;
    source.close();
    h.onClose(new EventSourceFailed(!opened));
  });
  return {
    close: () => {
      done = true;
      source.close();
    },
  };
};
