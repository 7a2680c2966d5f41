/**
 * The watch's missed-heartbeat check (0.4+ lines, heartbeats written apart from the capsule's turns):
 * a connection that stops delivering bytes, while its socket stays open (a silent partition), ends
 * as lost after a few heartbeat intervals learnt from the heartbeats themselves. Without the check
 * (the spec's line: silence means busy) the same connection stays open.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runWatch, type WatchEnd } from '../../src/upstream/watch-connection.js';

const ACK = 'event: connection-ack\ndata: {"conversation_mode":"stateless"}\n\n';
const BEAT = ':heartbeat\n\n';

interface Door {
  url: string;
  /** Heartbeats written so far on the open connection. */
  beats(): number;
  close(): Promise<void>;
}

/**
 * A door whose watch writes the ack, `beats` heartbeats `everyMs` apart (the first `together` in
 * one write), then goes silent with the socket left open.
 */
const silentDoor = async (beats: number, everyMs: number, together = 1): Promise<Door> => {
  let written = 0;
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(ACK);
    const beat = (): void => {
      if (written >= beats) return; // silent from here on; the socket stays open
      const n = written === 0 ? together : 1;
      res.write(BEAT.repeat(n));
      written += n;
      const t = setTimeout(beat, everyMs);
      timers.add(t);
    };
    timers.add(setTimeout(beat, everyMs));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    beats: () => written,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
};

const handlers = {
  onAck: () => {},
  onGap: () => {},
  onFrame: () => {},
  onComment: () => {},
  onQuiet: () => {},
};

describe('watch liveness', () => {
  let door: Door | null = null;
  afterEach(async () => {
    await door?.close();
    door = null;
  });

  it('0.4+: a connection silent for the learnt heartbeat intervals ends as lost', async () => {
    door = await silentDoor(4, 50);
    // Configured 10 s (3 × = 30 s): only the learnt 50 ms interval ends it within the test.
    const end = await runWatch({ url: door.url, heartbeat: { intervalMs: 10_000, misses: 3 }, handlers });
    expect(end.kind).toBe('lost');
    expect((end as Extract<WatchEnd, { kind: 'lost' }>).reason).toMatch(/^no heartbeat for \d+ ms$/);
    expect(end.acked).toBe(true);
    expect(door.beats()).toBe(4);
  });

  it('heartbeats read together do not shrink the interval: the connection lives while they come', async () => {
    door = await silentDoor(12, 100, 3);
    const abort = new AbortController();
    let comments = 0;
    const ended = runWatch({
      url: door.url,
      signal: abort.signal,
      heartbeat: { intervalMs: 10_000, misses: 3 },
      handlers: {
        ...handlers,
        onComment: () => {
          // Still open after every heartbeat the door wrote: abort once the last one is read.
          if (++comments === 12) abort.abort();
        },
      },
    });
    expect((await ended).kind).toBe('aborted');
  });

  it("the spec's line (no heartbeat check): the silent connection stays open", async () => {
    door = await silentDoor(2, 30);
    const abort = new AbortController();
    const ended = runWatch({ url: door.url, signal: abort.signal, handlers });
    // Past what the 0.4+ check would allow after the learnt interval (3 × 30 ms), many times over.
    await new Promise((r) => setTimeout(r, 600));
    abort.abort();
    expect((await ended).kind).toBe('aborted');
  });
});
