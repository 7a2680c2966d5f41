/**
 * A hand-rolled BeeOS SSE client, written the way BeeOS "Streaming" §7 does it (fetch + manual
 * parsing, `since=lastOffset` reconnect loop), with a switch to cut the connection on purpose.
 */
import type { Envelope } from '../../../../adapters/beeos/projection.js';

export interface SseEvent {
  event: string;
  data: string;
  id?: string;
  comment?: string;
}

/** Parse an SSE body into events (comments kept as `comment` events so tests can see keepalives). */
export async function* readSse(res: Response): AsyncGenerator<SseEvent> {
  if (!res.body) throw new Error('no body');
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let idx: number;
      while ((idx = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, idx);
        buf = buf.slice(idx + 2);
        const ev: SseEvent = { event: 'message', data: '' };
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) ev.comment = line.slice(1);
          else if (line.startsWith('event:')) ev.event = line.slice(6).trim();
          else if (line.startsWith('data:')) ev.data += line.slice(5).trim();
          else if (line.startsWith('id:')) ev.id = line.slice(3).trim();
        }
        yield ev;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** Read a stream until it closes (or `until` says stop); returns every event. */
export const collectSse = async (
  url: string,
  headers: Record<string, string> = {},
  until?: (ev: SseEvent) => boolean,
): Promise<{ status: number; headers: Headers; events: SseEvent[] }> => {
  const ac = new AbortController();
  const res = await fetch(url, { headers, signal: ac.signal });
  const events: SseEvent[] = [];
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    for await (const ev of readSse(res)) {
      events.push(ev);
      if (until?.(ev)) break;
    }
  }
  ac.abort();
  return { status: res.status, headers: res.headers, events };
};

export interface WatchResult {
  envelopes: Envelope[];
  cuts: number;
  endReason: string;
  controls: SseEvent[];
}

/**
 * The guide's task watcher: reconnect with `since=lastOffset` until `event: end`. Cuts its own
 * connection after every `cutEvery` envelopes. Bounded by `maxConnections`.
 */
export const watchWithReconnects = async (
  url: string,
  headers: Record<string, string>,
  cutEvery: number,
  maxConnections = 10_000,
): Promise<WatchResult> => {
  let lastOffset = 0;
  const envelopes: Envelope[] = [];
  const controls: SseEvent[] = [];
  let cuts = 0;
  for (let conn = 0; conn < maxConnections; conn++) {
    const ac = new AbortController();
    const sep = url.includes('?') ? '&' : '?';
    const res = await fetch(`${url}${sep}since=${lastOffset}`, { headers, signal: ac.signal });
    if (!res.ok) throw new Error(`http ${res.status}`);
    let seen = 0;
    let cut = false;
    try {
      for await (const ev of readSse(res)) {
        if (ev.comment !== undefined && ev.data === '') continue;
        if (ev.event === 'end')
          return { envelopes, cuts, endReason: (JSON.parse(ev.data) as { reason: string }).reason, controls };
        if (ev.event !== 'message') {
          controls.push(ev);
          continue;
        }
        const f = JSON.parse(ev.data) as Envelope;
        if (f.offset != null) lastOffset = f.offset;
        envelopes.push(f);
        if (++seen >= cutEvery) {
          cut = true;
          break;
        }
      }
    } catch (e) {
      if (!cut) throw e;
    }
    ac.abort();
    if (cut) cuts++;
  }
  throw new Error('too many connections');
};
