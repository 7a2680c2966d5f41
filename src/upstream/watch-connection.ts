/**
 * One `stream/watch` connection to a capsule: POST, read continuously, hand over the ack, the leading
 * `gap` and every later frame in order. Reconnecting, aligning and writing the log are the ingestor's.
 *
 * Replay vs live: the wire does not delimit them (spec "What stream/watch writes"), and this module no
 * longer guesses: the ingestor aligns frames by content as they come (replay-alignment.ts). The only
 * timing left is `onQuiet`, a hint that the replay burst is probably over (the socket was quiet for
 * `replayQuietMs` after the ack, or `replayMaxMs` passed), which only labels facts.
 */
import http from 'node:http';
import https from 'node:https';
import { SseFrameReader, type SseFrame } from './sse-frames.js';

export interface WatchHandlers {
  /** The `connection-ack` data line (null when the capsule did not open with one). */
  onAck(ack: string | null): void;
  /** The `gap` frame that opened the replay, if any (before any other frame). */
  onGap(gap: { firstAvailableId: string }): void;
  /** Every later frame, in order (replay and live alike; not the final `capsule-closed`). */
  onFrame(frame: SseFrame): void;
  /** A comment line (heartbeat): never inside a replay. */
  onComment(): void;
  /** Timing hint after the ack: the replay burst is probably over (labels only). */
  onQuiet(): void;
}

export type WatchEnd =
  | { kind: 'capsule-closed'; acked: boolean }
  | { kind: 'lost'; reason: string; acked: boolean }
  | { kind: 'aborted'; acked: boolean };

export interface WatchOptions {
  url: string;
  /** Sent as `Authorization: Bearer …`; never logged, never echoed in a reason. */
  doorToken?: string | null;
  /** The replay cursor (`Last-Event-ID`); the spec's line always replays from 0. */
  lastEventId?: string;
  /** Headers the capsule's line wants on every request (the 1.0 door's `A2A-Version`). */
  extraHeaders?: Record<string, string>;
  agent?: http.Agent;
  signal?: AbortSignal;
  /** Quiet time after which the replay burst is probably over (ms; a labelling hint only). */
  replayQuietMs?: number;
  /** Longest replay window after the ack, however busy the capsule (ms; a labelling hint only). */
  replayMaxMs?: number;
  /** Bound on one unfinished frame (characters). */
  maxFrameChars?: number;
  /**
   * Time allowed until response headers. After them, no idle timeout on the spec's line (silence
   * there means a busy capsule, not a dead one): TCP keep-alive finds a dead peer, since the
   * kernel answers probes whatever the capsule's thread is doing.
   */
  connectTimeoutMs?: number;
  /** TCP keep-alive idle time on the socket (then libuv's 10 probes 1 s apart). Default 1000. */
  keepAliveMs?: number;
  /**
   * Lines whose heartbeat is written apart from the capsule's turns (0.4+): the connection is lost
   * once `misses` heartbeat intervals pass without a byte. The interval is learnt from the heartbeats
   * seen (from the connection's start, as the capsule counts it); `intervalMs` stands until then.
   */
  heartbeat?: { intervalMs: number; misses: number };
  handlers: WatchHandlers;
}

const WATCH_BODY = '{"jsonrpc":"2.0","id":1,"method":"stream/watch","params":{}}';

const parseGap = (data: string): { firstAvailableId: string } | null => {
  const m = /"first_available_id"\s*:\s*(\d+)/.exec(data);
  return m ? { firstAvailableId: m[1]! } : null;
};

/** Run one watch connection until it ends; resolves with how it ended (never rejects). */
export const runWatch = (options: WatchOptions): Promise<WatchEnd> =>
  new Promise<WatchEnd>((resolve) => {
    const { handlers } = options;
    const url = new URL(options.url);
    const quietMs = options.replayQuietMs ?? 50;
    let phase: 'ack' | 'first' | 'after' = 'ack';
    let hinted = false;
    let acked = false;
    let closedByCapsule = false;
    let settled = false;
    let quietTimer: NodeJS.Timeout | undefined;
    let maxTimer: NodeJS.Timeout | undefined;
    // Missed-heartbeat check (options.heartbeat): one timer, re-armed only when it fires.
    let lastByteAt = 0;
    let lastBeatAt = 0;
    let beatMs = options.heartbeat?.intervalMs ?? 0;
    /** The longest gap between heartbeats seen on this connection (0: none yet). */
    let longestGap = 0;
    let beatTimer: NodeJS.Timeout | undefined;
    const silenceLimit = (): number => beatMs * (options.heartbeat?.misses ?? 3);
    const checkBeat = (): void => {
      if (settled) return;
      const silent = Date.now() - lastByteAt;
      if (silent >= silenceLimit()) {
        finish({ kind: 'lost', reason: `no heartbeat for ${silent} ms`, acked });
        return;
      }
      beatTimer = setTimeout(checkBeat, silenceLimit() - silent);
    };

    const finish = (end: WatchEnd): void => {
      if (settled) return;
      settled = true;
      if (quietTimer) clearTimeout(quietTimer);
      if (maxTimer) clearTimeout(maxTimer);
      if (beatTimer) clearTimeout(beatTimer);
      clearTimeout(connectTimer);
      options.signal?.removeEventListener('abort', onAbort);
      req.destroy();
      resolve(end);
    };
    const hint = (): void => {
      if (hinted || settled) return;
      hinted = true;
      if (quietTimer) clearTimeout(quietTimer);
      if (maxTimer) clearTimeout(maxTimer);
      handlers.onQuiet();
    };
    const reader = new SseFrameReader(
      {
        onFrame: (frame) => {
          if (settled) return;
          if (phase === 'ack') {
            phase = 'first';
            maxTimer = setTimeout(hint, options.replayMaxMs ?? 1000);
            if (frame.event === 'connection-ack' && frame.upstreamId === null) {
              acked = true;
              handlers.onAck(frame.data);
              return;
            }
            handlers.onAck(null);
          }
          if (phase === 'first') {
            phase = 'after';
            const gap = frame.event === 'gap' && frame.upstreamId === null ? parseGap(frame.data) : null;
            if (gap) return handlers.onGap(gap);
          }
          if (frame.event === 'capsule-closed' && frame.upstreamId === null) {
            closedByCapsule = true;
            finish({ kind: 'capsule-closed', acked });
            return;
          }
          handlers.onFrame(frame);
        },
        onComment: () => {
          if (options.heartbeat) {
            // The capsule counts heartbeats from the connection's start, whatever was written between.
            // The longest gap seen stands (two heartbeats read together say nothing of the interval),
            // never above the configured one.
            const now = Date.now();
            longestGap = Math.max(longestGap, now - lastBeatAt);
            if (longestGap >= 10) beatMs = Math.min(options.heartbeat.intervalMs, longestGap);
            lastBeatAt = now;
            // Re-armed per heartbeat (one timer a heartbeat interval): a deadline set before the
            // interval was learnt would otherwise wait out the configured one once.
            if (beatTimer) clearTimeout(beatTimer);
            if (!settled) beatTimer = setTimeout(checkBeat, silenceLimit());
          }
          if (!settled && phase !== 'ack') handlers.onComment();
        },
        onOversize: (message) => finish({ kind: 'lost', reason: message, acked }),
      },
      options.maxFrameChars,
    );

    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'last-event-id': options.lastEventId ?? '0',
      'content-length': String(Buffer.byteLength(WATCH_BODY)),
      ...options.extraHeaders,
    };
    if (options.doorToken) headers.authorization = `Bearer ${options.doorToken}`;
    const request = url.protocol === 'https:' ? https.request : http.request;
    const req = request(url, { method: 'POST', headers, agent: options.agent });

    const connectTimer = setTimeout(
      () => finish({ kind: 'lost', reason: 'connect timeout', acked }),
      options.connectTimeoutMs ?? 10_000,
    );
    const onAbort = (): void => finish({ kind: 'aborted', acked });
    if (options.signal?.aborted) {
      queueMicrotask(onAbort);
    } else {
      options.signal?.addEventListener('abort', onAbort, { once: true });
    }

    req.on('socket', (socket) => {
      // TCP keep-alive: a dead peer is found without an idle timeout, busy capsule or not.
      socket.setKeepAlive(true, options.keepAliveMs ?? 1000);
      socket.setNoDelay(true);
    });
    req.on('error', (err: NodeJS.ErrnoException) =>
      finish({ kind: 'lost', reason: err.code ?? err.message, acked }),
    );
    req.on('response', (res) => {
      clearTimeout(connectTimer);
      if (options.heartbeat) {
        lastByteAt = lastBeatAt = Date.now();
        beatTimer = setTimeout(checkBeat, silenceLimit());
      }
      const type = String(res.headers['content-type'] ?? '');
      if (res.statusCode === 401 || res.statusCode === 403) {
        // The door refused our token (0.5+: a plain HTTP answer, not JSON-RPC): say so, never the token.
        res.resume();
        finish({ kind: 'lost', reason: 'unauthorized', acked });
        return;
      }
      if (res.statusCode !== 200 || !type.startsWith('text/event-stream')) {
        res.resume();
        finish({ kind: 'lost', reason: `HTTP ${res.statusCode} ${type}`.trim(), acked });
        return;
      }
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        lastByteAt = Date.now();
        reader.push(chunk);
        if (phase !== 'ack' && !hinted && !settled) {
          if (quietTimer) clearTimeout(quietTimer);
          quietTimer = setTimeout(hint, quietMs);
        }
      });
      res.on('end', () =>
        finish(
          closedByCapsule
            ? { kind: 'capsule-closed', acked }
            : { kind: 'lost', reason: 'stream ended without capsule-closed', acked },
        ),
      );
      res.on('error', (err: NodeJS.ErrnoException) =>
        finish({ kind: 'lost', reason: err.code ?? err.message, acked }),
      );
      res.on('close', () => finish({ kind: 'lost', reason: 'connection closed', acked }));
    });
    req.end(WATCH_BODY);
  });
