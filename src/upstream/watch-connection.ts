/**
 * One `stream/watch` connection to a capsule: POST, read continuously, split what arrives into the
 * ack, the replay and live frames. Reconnecting, reconciling and writing the log are the ingestor's.
 *
 * Replay vs live: the wire does not delimit them (spec "What stream/watch writes"). The capsule writes
 * the replay synchronously right after `connection-ack`, so it arrives as one burst. Rule: the replay
 * is every id-bearing frame (after an optional leading `gap`) until the socket has been quiet for
 * `replayQuietMs`, or until something that cannot be in a replay arrives (a heartbeat comment, a frame
 * without an id, the end of the stream). Limits: a live frame written within the quiet window joins
 * the replay, which is harmless (alignment finds it new and appends it in order); so does every live
 * frame while a busy capsule never pauses, which is why the window also closes `replayMaxMs` after
 * the ack. A replay split by a network stall longer than the quiet window would make its tail look
 * live (duplicates), so keep the window above the link's round-trip time; on loopback and a LAN the
 * defaults are ample. A connection that ends inside the window delivers no replay at all (it may be
 * truncated): the next connection replays those frames again.
 */
import http from 'node:http';
import https from 'node:https';
import { SseFrameReader, type SseFrame } from './sse-frames.js';

export interface WatchHandlers {
  /** The `connection-ack` data line (null when the capsule did not open with one). */
  onAck(ack: string | null): void;
  /** The replay, once: after the ack, before any live frame. */
  onReplay(gap: { firstAvailableId: string } | null, frames: SseFrame[]): void;
  /** Every later frame, in order (including frames without an id the gateway does not know). */
  onLive(frame: SseFrame): void;
  /** Any bytes arrived (frame or heartbeat): the connection is alive. */
  onActivity?(): void;
}

export type WatchEnd =
  | { kind: 'capsule-closed'; acked: boolean }
  | { kind: 'lost'; reason: string; acked: boolean }
  | { kind: 'aborted'; acked: boolean };

export interface WatchOptions {
  url: string;
  /** Sent as `Authorization: Bearer …`; never logged, never echoed in a reason. */
  doorToken?: string | null;
  agent?: http.Agent;
  signal?: AbortSignal;
  /** Quiet time that ends the replay burst (ms). */
  replayQuietMs?: number;
  /** Longest replay window after the ack, however busy the capsule (ms). */
  replayMaxMs?: number;
  /** Time allowed until response headers; after them there is no idle timeout (silence ≠ death). */
  connectTimeoutMs?: number;
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
    let phase: 'ack' | 'replay' | 'live' = 'ack';
    let acked = false;
    let closedByCapsule = false;
    let settled = false;
    let gap: { firstAvailableId: string } | null = null;
    let replay: SseFrame[] = [];
    let quietTimer: NodeJS.Timeout | undefined;
    let maxTimer: NodeJS.Timeout | undefined;

    const finish = (end: WatchEnd): void => {
      if (settled) return;
      settled = true;
      if (quietTimer) clearTimeout(quietTimer);
      if (maxTimer) clearTimeout(maxTimer);
      clearTimeout(connectTimer);
      options.signal?.removeEventListener('abort', onAbort);
      // A connection that ends inside the replay burst may have cut it short: reconciling a truncated
      // replay would read its frames as new. Drop it; the next connection replays them again.
      replay = [];
      req.destroy();
      resolve(end);
    };
    const endReplay = (): void => {
      if (phase !== 'replay') return;
      phase = 'live';
      if (quietTimer) clearTimeout(quietTimer);
      if (maxTimer) clearTimeout(maxTimer);
      const frames = replay;
      replay = [];
      handlers.onReplay(gap, frames);
    };
    const live = (frame: SseFrame): void => {
      if (frame.event === 'capsule-closed' && frame.upstreamId === null) {
        closedByCapsule = true;
        finish({ kind: 'capsule-closed', acked });
        return;
      }
      handlers.onLive(frame);
    };
    const reader = new SseFrameReader({
      onFrame: (frame) => {
        if (settled) return;
        if (phase === 'ack') {
          phase = 'replay';
          maxTimer = setTimeout(endReplay, options.replayMaxMs ?? 1000);
          if (frame.event === 'connection-ack' && frame.upstreamId === null) {
            acked = true;
            handlers.onAck(frame.data);
            return;
          }
          handlers.onAck(null);
        }
        if (phase === 'replay') {
          if (frame.upstreamId !== null) {
            replay.push(frame);
            return;
          }
          if (frame.event === 'gap' && replay.length === 0 && gap === null) {
            gap = parseGap(frame.data);
            if (gap) return;
          }
          endReplay(); // nothing without an id is ever buffered (spec "Replay"): this one is live
        }
        live(frame);
      },
      onComment: () => {
        if (phase === 'replay') endReplay(); // heartbeats never enter the replay
      },
    });

    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'last-event-id': '0',
      'content-length': String(Buffer.byteLength(WATCH_BODY)),
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
      socket.setKeepAlive(true, 15_000); // TCP keep-alive: a dead peer is found without an idle timeout
      socket.setNoDelay(true);
    });
    req.on('error', (err: NodeJS.ErrnoException) =>
      finish({ kind: 'lost', reason: err.code ?? err.message, acked }),
    );
    req.on('response', (res) => {
      clearTimeout(connectTimer);
      const type = String(res.headers['content-type'] ?? '');
      if (res.statusCode !== 200 || !type.startsWith('text/event-stream')) {
        res.resume();
        finish({ kind: 'lost', reason: `HTTP ${res.statusCode} ${type}`.trim(), acked });
        return;
      }
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        handlers.onActivity?.();
        reader.push(chunk);
        if (phase === 'replay' && !settled) {
          if (quietTimer) clearTimeout(quietTimer);
          quietTimer = setTimeout(endReplay, quietMs);
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
