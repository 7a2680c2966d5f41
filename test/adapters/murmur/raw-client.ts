/** A raw HTTP SSE client for wire tests: keeps every byte, splits blocks, waits on data events. */
import http from 'node:http';
import { scaled } from '../../support/deadlines.js';

export interface ParsedFrame {
  id: string | null;
  event: string | null;
  data: string;
  raw: string;
}

export interface RawStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Body bytes so far (chunked framing removed by node). */
  body(): string;
  /** Complete blocks (text between blank lines), heartbeats included. */
  blocks(): string[];
  /** Complete blocks that are frames (not comments). */
  frames(): ParsedFrame[];
  /** Resolve once `pred` holds (checked on every chunk); reject after `timeoutMs` or at end if it never does. */
  waitFor(pred: (s: RawStream) => boolean, what: string, timeoutMs?: number): Promise<void>;
  ended: Promise<void>;
  isEnded(): boolean;
  close(): void;
}

export const parseBlock = (raw: string): ParsedFrame | null => {
  if (raw.startsWith(':')) return null;
  let id: string | null = null;
  let event: string | null = null;
  let data = '';
  for (const line of raw.split('\n')) {
    if (line.startsWith('id: ')) id = line.slice(4);
    else if (line.startsWith('event: ')) event = line.slice(7);
    else if (line.startsWith('data: ')) data = line.slice(6);
  }
  return { id, event, data, raw };
};

export const openRaw = (
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<RawStream> =>
  new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      let ended = false;
      const checks = new Set<() => void>();
      let endResolve!: () => void;
      const endedP = new Promise<void>((r) => (endResolve = r));
      const run = (): void => {
        for (const c of [...checks]) c();
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        run();
      });
      const finish = (): void => {
        if (ended) return;
        ended = true;
        endResolve();
        run();
      };
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
      const stream: RawStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: () => text,
        blocks: () => {
          const parts = text.split('\n\n');
          parts.pop();
          return parts;
        },
        frames: () =>
          stream
            .blocks()
            .map(parseBlock)
            .filter((f): f is ParsedFrame => f !== null),
        waitFor: (pred, what, timeoutMs = 10_000) =>
          new Promise<void>((ok, fail) => {
            if (pred(stream)) return ok();
            const timer = setTimeout(() => {
              checks.delete(check);
              fail(new Error(`timed out waiting for ${what}; body so far:\n${text.slice(-2000)}`));
            }, scaled(timeoutMs));
            const check = (): void => {
              if (pred(stream)) {
                clearTimeout(timer);
                checks.delete(check);
                ok();
              } else if (ended) {
                clearTimeout(timer);
                checks.delete(check);
                fail(new Error(`stream ended before ${what}; body:\n${text.slice(-2000)}`));
              }
            };
            checks.add(check);
          }),
        ended: endedP,
        isEnded: () => ended,
        close: () => {
          req.destroy();
          res.destroy();
        },
      };
      resolve(stream);
    });
    req.end(init.body);
  });

/** A JSON-RPC POST to the gateway's capsule address. */
export const rpcPost = (
  baseUrl: string,
  capsule: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<RawStream> =>
  openRaw(`${baseUrl}/murmur/${capsule}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

export const WATCH = { jsonrpc: '2.0', id: 1, method: 'stream/watch', params: {} };

export const messageStream = (text: string, extra: Record<string, unknown> = {}): unknown => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'message/stream',
  params: { message: { messageId: `m-${Math.random()}`, role: 'user', parts: [{ text }], ...extra } },
});
